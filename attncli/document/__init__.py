"""The vocabulary every output shares: stage titles and formulas, notation, numbers as text, escaping."""
