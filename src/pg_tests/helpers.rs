// Helpers shared by the in-backend tests (included into `mod tests` in lib.rs).

fn one<T: pgrx::IntoDatum + pgrx::FromDatum>(sql: &str) -> Option<T> {
    Spi::get_one::<T>(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn run(sql: &str) {
    Spi::run(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The SQLSTATE `sql` fails with, or "ok".
fn sqlstate(sql: &str) -> String {
    let quoted = pgrx::spi::quote_literal(sql);
    one::<String>(&format!("SELECT tests.sqlstate_of({quoted})")).unwrap_or_default()
}

