"""Real models: read a local Hugging Face checkpoint folder into the exact float64 inputs of one attention layer.

Import `attncli.sources.checkpoints.layer` for the public entry points; this package imports nothing heavy by itself.
"""
