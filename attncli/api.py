"""The documented Python API: load a scenario, run it, explain a word, decode, tile, render (filled in as the commands move onto it)."""
