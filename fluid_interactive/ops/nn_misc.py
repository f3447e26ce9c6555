"""Other neural-network ops: dropout, lookup_table (embedding), one_hot, gelu, elu, swish, log_softmax, flatten, pad."""
