"""How long a walk-through's sums, key sequences and matrices may be before they are shortened (unless full)."""

LONG_SUM = 12  # sums of more terms, and sequences of more keys, are shortened (unless full)
LONG_TERMS = 6  # a shortened sum shows its largest terms and adds up the rest in one number
LONG_KEYS = 8  # a shortened sequence shows the keys with the largest weights
BIG_MATRIX = 10  # a matrix with more rows or columns than this is left out (unless full)
