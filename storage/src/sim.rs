//! PLACEHOLDER, being written by a helper: the simulated disk.
