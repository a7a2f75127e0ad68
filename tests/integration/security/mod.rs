//! Privileges, hostile `search_path`s and tables, row security, the error guards.

mod error_guards;
mod operator_precedence;
mod privileges;
mod search_path;
mod tables;
mod tenants;
