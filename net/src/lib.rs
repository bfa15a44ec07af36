//! The BookKeeper wire protocol (being written).
