//! Privileges, hostile `search_path`s and tables, row security, the error guards.

mod committed;
mod error_guards;
pub(crate) mod install_path;
mod operator_precedence;
mod privileges;
mod public_functions;
mod search_path;
mod tables;
mod tenants;
