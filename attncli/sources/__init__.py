"""Inputs into `core.Scenario`: YAML files, the built-in scenarios, the generator, and real checkpoints."""
