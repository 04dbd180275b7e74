"""The math: scenarios, the variants of attention, the engine, the online softmax, decoding. Pure float64 NumPy, no text, no I/O."""
