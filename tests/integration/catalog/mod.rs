//! The installed extension against its sources and documents: the reference, the release files,
//! the documents' SQL blocks, the error table, upgrades, dump and restore, the canonicalizer's
//! limits, the SQL fuzzer.

mod canonical_limits;
mod doc_blocks;
mod dump_restore;
mod error_table;
mod reference;
mod release;
mod sql_fuzz;
mod upgrade;
