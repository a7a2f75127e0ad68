/*
 * idem_call's guard around the user's function: the one piece of the extension in C.
 *
 * Why C: the caught error's ErrorData must be kept as Postgres made it (its SQLSTATE, even a
 * custom one such as AB123), and pgrx's own catch rewrites codes it does not know to XX000.
 * This is plpgsql's exception-block pattern (pl_exec.c, exec_stmt_block): a subtransaction,
 * PG_TRY/PG_CATCH, CopyErrorData, FlushErrorState, RollbackAndReleaseCurrentSubTransaction.
 *
 * Built by build.rs against the server headers of the Postgres major being built for.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/elog.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

/*
 * What the current user lacks to call function `fn`, in schema `nsp`: IDEM_CALL_ALLOWED,
 * IDEM_CALL_NO_EXECUTE or IDEM_CALL_NO_USAGE. Checks what a call by name would: EXECUTE (as
 * the executor does) and USAGE on the schema (as the name lookup does, which a numeric
 * regprocedure skips), and lets security hooks see both, like LookupExplicitNamespace and
 * the executor. Keep the codes in step with src/entry/call_target.rs.
 */
#define IDEM_CALL_ALLOWED 0
#define IDEM_CALL_NO_EXECUTE 1
#define IDEM_CALL_NO_USAGE 2

int
idem_call_denied(Oid fn, Oid nsp)
{
#if PG_VERSION_NUM >= 160000
	if (object_aclcheck(ProcedureRelationId, fn, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
		return IDEM_CALL_NO_EXECUTE;
	if (object_aclcheck(NamespaceRelationId, nsp, GetUserId(), ACL_USAGE) != ACLCHECK_OK)
		return IDEM_CALL_NO_USAGE;
#else
	if (pg_proc_aclcheck(fn, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
		return IDEM_CALL_NO_EXECUTE;
	if (pg_namespace_aclcheck(nsp, GetUserId(), ACL_USAGE) != ACLCHECK_OK)
		return IDEM_CALL_NO_USAGE;
#endif
	InvokeNamespaceSearchHook(nsp, true);
	InvokeFunctionExecuteHook(fn);
	return IDEM_CALL_ALLOWED;
}

/*
 * Call fn(arg) (one non-null argument) in a subtransaction.
 *
 * Success: the subtransaction is released (its work stays), the result is returned, allocated
 * in the caller's memory context, *isnull tells whether it is NULL, and *err is NULL.
 * Any ERROR: the subtransaction is rolled back (its work is undone), the error state is
 * flushed, and *err is a copy of the error made in `errcxt`; the result is (Datum) 0.
 * Errors outside the call itself (starting the subtransaction) propagate as usual.
 */
Datum
idem_call_in_subxact(Oid fn, Datum arg, bool *isnull, MemoryContext errcxt, ErrorData **err)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile Datum result = (Datum) 0;
	volatile bool result_isnull = true;

	*err = NULL;
	BeginInternalSubTransaction(NULL);
	/* Run the function in the caller's memory context, so its result outlives the release. */
	MemoryContextSwitchTo(oldcontext);

	PG_TRY();
	{
		LOCAL_FCINFO(fcinfo, 1);
		FmgrInfo	flinfo;

		fmgr_info(fn, &flinfo);
		InitFunctionCallInfoData(*fcinfo, &flinfo, 1, InvalidOid, NULL, NULL);
		fcinfo->args[0].value = arg;
		fcinfo->args[0].isnull = false;
		result = FunctionCallInvoke(fcinfo);
		result_isnull = fcinfo->isnull;

		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(errcxt);
		*err = CopyErrorData();
		FlushErrorState();

		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		result = (Datum) 0;
		result_isnull = true;
	}
	PG_END_TRY();

	*isnull = result_isnull;
	return result;
}
