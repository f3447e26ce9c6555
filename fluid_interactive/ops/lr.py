"""Learning-rate schedules (role LRSched): ops computing the rate from a step counter."""
