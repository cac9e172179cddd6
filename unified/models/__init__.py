"""Where weights come from: built-in names (smollm2, tiny), local folders, hub ids."""
