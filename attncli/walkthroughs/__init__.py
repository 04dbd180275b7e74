"""Results turned into the steps and reports people read: explain's narration, tiling, decoding."""
