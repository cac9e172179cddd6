"""Model text: what the model reads (the program prompt) and what it writes (code, answers,
literal inputs), as pure functions over strings and values."""
