//! Record batch header view.
