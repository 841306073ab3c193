//! AWS adapters against moto (being written).
