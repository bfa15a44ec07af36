//! The journal (being written).
