//! The steps the entry points share: the seam that picks the direct path or SQL
//! (`seam`), changing an attempt (`change`), the transitions over datums (`transition`), the
//! upkeep of a Citus table (`citus`), result rows (`result_row`), arguments (`args`, `input`).

pub mod args;
pub mod change;
pub mod citus;
pub mod input;
pub mod result_row;
pub mod seam;
pub mod transition;
