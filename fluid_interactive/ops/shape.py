"""Shape and layout ops: reshape, transpose, concat, split, slice, squeeze, unsqueeze,
cast, and the reduce_* family."""
