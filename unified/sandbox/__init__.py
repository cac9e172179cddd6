"""The sandboxed executor: generated code runs here, never in the trainer."""
