//! What "`idempotency.requests` exactly as the extension created it" means, checked on the
//! locked relation before the direct paths read or write it (`lookup.rs`, `writer.rs`).
//!
//! Names alone are not enough: a column whose type, typmod or collation changed would be read
//! and written with the wrong layout, and a CHECK replaced by another of the same name would be
//! bypassed. So every column's type, typmod and collation is compared, and every CHECK's stored
//! expression is reduced to a canonical text (built-in operator and function OIDs, column
//! numbers, constants through their output functions) and compared with the expected one.

use core::ffi::CStr;

use pgrx::PgTupleDesc;
use pgrx::pg_sys::{self, Oid};

use crate::base::record::{COLUMNS, NATTS, Ty};

fn collation(ty: Ty) -> Oid {
    if ty == Ty::Text {
        pg_sys::DEFAULT_COLLATION_OID
    } else {
        pg_sys::InvalidOid
    }
}

/// The CHECK constraints of sql/bootstrap.sql in canonical form (see [`canonical`]): `vN` is
/// column N, `opN`/`fnN` a built-in operator/function by OID (the same in every major),
/// `c(type)'…'` a constant's bytes in hex (an `idem_status` one by its label).
const CHECKS: [(&CStr, &str); 8] = [
    (
        c"requests_scope_check",
        "and(op525(fn1374(v1),c(23)'1'),op523(fn1374(v1),c(23)'ff'))",
    ),
    (
        c"requests_key_check",
        "and(op525(fn1374(v2),c(23)'1'),op523(fn1374(v2),c(23)'ff'))",
    ),
    (
        c"requests_request_hash_check",
        "and(op525(fn1374(v3),c(23)'1'),op523(fn1374(v3),c(23)'ff'))",
    ),
    (c"requests_attempt_check", "op525(v5,c(23)'1')"),
    (
        c"requests_lease_check",
        "op91(op3516(v4,c(status)'processing'),notnull(v12))",
    ),
    (
        c"requests_response_check",
        "or(op3516(v4,c(status)'succeeded'),isnull(v6))",
    ),
    (
        c"requests_intervals_check",
        "and(op1334(v13,c(1186)'00000000000000000000000000000000'),op1333(v13,c(1186)'000000000000000000000000b0040000'),\
         op1334(v14,c(1186)'00000000000000000000000000000000'),op1333(v14,c(1186)'000000000000000000000000b0040000'))",
    ),
    (
        c"requests_times_check",
        "and(op1325(v16,v15),op1325(v11,v15))",
    ),
];

/// 0.1.0's `requests_intervals_check` (positive only), on a database whose extension SQL is
/// not yet updated. Weaker than 0.2.0's, and the arguments' rule (at most 100 years) keeps
/// every direct write within both, so it is accepted.
const INTERVALS_CHECK_0_1_0: &str = "and(op1334(v13,c(1186)'00000000000000000000000000000000'),\
                                     op1334(v14,c(1186)'00000000000000000000000000000000'))";

/// What the direct paths may do with the table.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The first 17 columns and the primary key are as created: read them by position.
    pub readable: bool,
    /// Also exactly 17 columns, the NOT NULLs, no defaults, the 8 CHECKs, no triggers or
    /// rules: a row built here is what SQL would write.
    pub writable: bool,
}

/// The shape of the open (locked) `rel` and its primary key `index`.
///
/// # Safety
/// `rel` and `index` are open relations; `status_type` is the extension's `idem_status`.
pub unsafe fn of(rel: pg_sys::Relation, index: pg_sys::Relation, status_type: Oid) -> Shape {
    // SAFETY: reads the relcache entries of open relations.
    unsafe {
        // Child tables are judged by the caller (`catalog.rs`, `generations.rs`).
        let readable = (*(*rel).rd_rel).relkind == pg_sys::RELKIND_RELATION as core::ffi::c_char
            && columns_match(rel, status_type, false)
            && primary_key_matches(rel, index);
        let writable = readable
            && (*rel).trigdesc.is_null()
            && (*rel).rd_rules.is_null()
            && columns_match(rel, status_type, true)
            && checks_match(rel, status_type);
        Shape { readable, writable }
    }
}

unsafe fn columns_match(rel: pg_sys::Relation, status_type: Oid, exact: bool) -> bool {
    // SAFETY: an open relation's tuple descriptor.
    let tupdesc = unsafe { PgTupleDesc::from_pg_unchecked((*rel).rd_att) };
    if tupdesc.len() < NATTS || (exact && tupdesc.len() != NATTS) {
        return false;
    }
    tupdesc
        .iter()
        .zip(COLUMNS)
        .all(|(attr, (name, ty, not_null))| {
            // SAFETY: attname is a NUL-terminated NameData.
            let attname = unsafe { CStr::from_ptr(attr.attname.data.as_ptr()) };
            !attr.attisdropped
                && attname == name
                && attr.atttypid == ty.oid(status_type)
                && attr.atttypmod == -1
                && attr.attcollation == collation(ty)
                && attr.attgenerated == 0
                && attr.attidentity == 0
                && (!exact || (attr.attnotnull == not_null && !attr.atthasdef))
        })
}

unsafe fn primary_key_matches(rel: pg_sys::Relation, index: pg_sys::Relation) -> bool {
    // SAFETY: an open index's pg_index row, opfamilies and collations (two key columns).
    unsafe {
        let form = (*index).rd_index;
        if form.is_null()
            || (*form).indrelid != (*rel).rd_id
            || (*form).indnatts != 2
            || (*form).indnkeyatts != 2
            || !(*form).indisunique
            || !(*form).indisvalid
            || !(*form).indislive
            || (*(*index).rd_rel).relam != pg_sys::BTREE_AM_OID
        {
            return false;
        }
        let keys = (*form).indkey.values.as_slice(2);
        let families = core::slice::from_raw_parts((*index).rd_opfamily, 2);
        let collations = core::slice::from_raw_parts((*index).rd_indcollation, 2);
        keys == [1, 2]
            && families.iter().all(|f| *f == pg_sys::TEXT_BTREE_FAM_OID)
            && collations
                .iter()
                .all(|c| *c == pg_sys::DEFAULT_COLLATION_OID)
            && pg_sys::RelationGetIndexPredicate(index).is_null()
            && pg_sys::RelationGetIndexExpressions(index).is_null()
    }
}

unsafe fn checks_match(rel: pg_sys::Relation, status_type: Oid) -> bool {
    // SAFETY: an open relation's constraints; ccbin is a node string of a stored expression.
    unsafe {
        let constr = (*(*rel).rd_att).constr;
        if constr.is_null() || (*constr).num_check as usize != CHECKS.len() {
            return false;
        }
        let checks = core::slice::from_raw_parts((*constr).check, CHECKS.len());
        checks.iter().all(|check| {
            let name = CStr::from_ptr(check.ccname);
            let Some((_, expected)) = CHECKS.iter().find(|(n, _)| *n == name) else {
                return false;
            };
            if !check.ccvalid || check.ccbin.is_null() {
                return false;
            }
            let found = canonical(pg_sys::stringToNode(check.ccbin).cast(), status_type);
            found.as_deref() == Some(*expected)
                || (name == c"requests_intervals_check"
                    && found.as_deref() == Some(INTERVALS_CHECK_0_1_0))
        })
    }
}

/// The label of an enum value.
fn enum_label(value: Oid) -> Option<String> {
    // SAFETY: a syscache lookup by OID; the tuple is released before returning.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::ENUMOID as _, value.into());
        if tuple.is_null() {
            return None;
        }
        let form = pg_sys::GETSTRUCT(tuple) as pg_sys::Form_pg_enum;
        let label = CStr::from_ptr((*form).enumlabel.data.as_ptr())
            .to_string_lossy()
            .into_owned();
        pg_sys::ReleaseSysCache(tuple);
        Some(label)
    }
}

/// The canonical text of a stored CHECK expression, or `None` for a node kind that no CHECK of
/// the extension uses (such a constraint is not the extension's).
///
/// # Safety
/// `node` is a valid expression tree.
pub unsafe fn canonical(node: *mut pg_sys::Node, status_type: Oid) -> Option<String> {
    pg_sys::check_for_interrupts!();
    if node.is_null() {
        return None;
    }
    // SAFETY: each cast follows the node's tag.
    unsafe {
        let args = |list: *mut pg_sys::List| -> Option<String> {
            if list.is_null() {
                return Some(String::new());
            }
            let parts: Option<Vec<String>> = (0..(*list).length as usize)
                .map(|i| canonical((*(*list).elements.add(i)).ptr_value.cast(), status_type))
                .collect();
            Some(parts?.join(","))
        };
        match (*node).type_ {
            pg_sys::NodeTag::T_BoolExpr => {
                let expr = node.cast::<pg_sys::BoolExpr>();
                let op = match (*expr).boolop {
                    pg_sys::BoolExprType::AND_EXPR => "and",
                    pg_sys::BoolExprType::OR_EXPR => "or",
                    _ => "not",
                };
                Some(format!("{op}({})", args((*expr).args)?))
            }
            pg_sys::NodeTag::T_OpExpr => {
                let expr = node.cast::<pg_sys::OpExpr>();
                Some(format!(
                    "op{}({})",
                    u32::from((*expr).opno),
                    args((*expr).args)?
                ))
            }
            pg_sys::NodeTag::T_FuncExpr => {
                let expr = node.cast::<pg_sys::FuncExpr>();
                Some(format!(
                    "fn{}({})",
                    u32::from((*expr).funcid),
                    args((*expr).args)?
                ))
            }
            pg_sys::NodeTag::T_Var => {
                let var = node.cast::<pg_sys::Var>();
                Some(format!("v{}", (*var).varattno))
            }
            pg_sys::NodeTag::T_NullTest => {
                let test = node.cast::<pg_sys::NullTest>();
                let kind = if (*test).nulltesttype == pg_sys::NullTestType::IS_NULL {
                    "isnull"
                } else {
                    "notnull"
                };
                Some(format!(
                    "{kind}({})",
                    canonical((*test).arg.cast(), status_type)?
                ))
            }
            pg_sys::NodeTag::T_Const => {
                let c = node.cast::<pg_sys::Const>();
                if (*c).constisnull {
                    return Some("null".into());
                }
                let ty = (*c).consttype;
                if ty == status_type {
                    return enum_label(Oid::from((*c).constvalue.value() as u32))
                        .map(|label| format!("c(status)'{label}'"));
                }
                // The value's bytes, not its text: output functions follow settings such as
                // IntervalStyle, and the result must not.
                let value = if (*c).constbyval {
                    format!("{:x}", (*c).constvalue.value())
                } else if (*c).constlen > 0 {
                    let bytes = core::slice::from_raw_parts(
                        (*c).constvalue.cast_mut_ptr::<u8>(),
                        (*c).constlen as usize,
                    );
                    bytes.iter().map(|b| format!("{b:02x}")).collect()
                } else {
                    return None;
                };
                Some(format!("c({})'{value}'", u32::from(ty)))
            }
            _ => None,
        }
    }
}
