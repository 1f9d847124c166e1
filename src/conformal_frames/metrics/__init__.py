"""The metric families, one module each: every family imports only the engine, the inputs, the numerics, validation and results, never another family."""
