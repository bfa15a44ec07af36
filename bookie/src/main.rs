//! The bookie process (being written).
fn main() {}
