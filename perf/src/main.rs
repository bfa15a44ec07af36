//! bkperf (being written).
fn main() {}
