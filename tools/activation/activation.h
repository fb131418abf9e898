/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The activation decision of ummunot's site-wide launchers, shared by
 * ummunot-exec(1) and the Slurm SPANK plugin (ummunot-slurm(8)): one
 * implementation of
 *
 *   - the mode: on, require or off (the UMMUNOT variable, else "mode =" in
 *     the site's exec.conf, else on);
 *   - the checks: /dev/ummunot opens and completes its handshake through
 *     libummunot, every adapter library loads;
 *   - the environment a protected program starts with: the adapters in
 *     front of LD_PRELOAD, the stacks' memory hooks that an adapter replaces
 *     turned off, UMMUNOT_REQUIRE=1 in mode require; and, for a launcher
 *     whose programs may inherit an earlier activation (a Slurm step
 *     started from an activated batch script), what undoes it.
 *
 * A failed check or parse leaves one line in WHY (no trailing newline):
 * the reason, as ummunot-exec prints it and as the plugin puts it in the
 * user's output.  Functions that fail return a negative value.
 */
#ifndef UMMUNOT_ACTIVATION_H
#define UMMUNOT_ACTIVATION_H

#include <stddef.h>

#include <ummunot/ummunot.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Exit status of a program refused in mode require (a shell's "found but
 * cannot run").
 */
#define UA_EXIT_REFUSED 126

enum ua_mode { UA_MODE_OFF, UA_MODE_ON, UA_MODE_REQUIRE };

/* "on"/"1", "require", "off"/"0".  -EINVAL for anything else. */
int ua_parse_mode(const char *s, enum ua_mode *m);
const char *ua_mode_name(enum ua_mode m);

/*
 * "mode = on|require|off" from the site's file PATH.  A missing file is
 * "on"; a file that exists but says anything else is an error: a site that
 * wrote "requre" wants to know, not to run unprotected.
 */
int ua_read_conf(const char *path, enum ua_mode *m, char *why, size_t len);

/*
 * The mode of a program: ENV (the value of UMMUNOT, a job's choice) when
 * set and not empty, else the site's file CONF.  A value of either that is
 * no mode is an error in every mode: a typing error never means
 * "unprotected".
 */
int ua_resolve_mode(const char *env, const char *conf, enum ua_mode *m, char *why, size_t len);

/*
 * libummunot's monitor entry points, as the checks call them: the linked
 * library's (ummunot-exec) or the ones ua_monitor_ops_load() found.
 */
struct ua_monitor_ops {
	int (*open)(const struct ummunot_monitor_attr *attr, struct ummunot_monitor **m);
	void (*close)(struct ummunot_monitor *m);
};

/* dlopen LIBRARY (a path or a soname) and look the entry points up. */
int ua_monitor_ops_load(const char *library, struct ua_monitor_ops *ops, char *why, size_t len);

/* 0: the device opens and completes its handshake. */
int ua_check_device(const struct ua_monitor_ops *ops, char *why, size_t len);

/*
 * 0: every library of LIST (':'-separated full paths) loads here, so it
 * will load in the program (same loader path, same dependencies).  dlopen
 * runs the adapters' constructors in this process (libummunot-ofi-preload's
 * with UMMUNOT_OFI=0, so that it does not import its monitor here).
 */
int ua_check_adapters(const char *list, char *why, size_t len);

/* Everything activation needs: an adapter at all, the device, ADAPTERS. */
int ua_check(const struct ua_monitor_ops *ops, const char *adapters, char *why, size_t len);

/*
 * ua_check() in a child process, for a long-lived caller (slurmstepd) that
 * must not load libummunot or the adapters, nor have its environment
 * touched: the child takes its effective user and group ids as its real
 * and saved ones (the user a step runs as; the device charges its memory
 * to the opener's real uid), loads LIBRARY with ua_monitor_ops_load(),
 * runs ua_check() and reports through a pipe.  A child that has not
 * answered in TIMEOUT_S seconds is killed and the check fails.
 */
int ua_check_forked(const char *library, const char *adapters, unsigned int timeout_s,
		    char *why, size_t len);

/*
 * An environment change: NAME=VALUE, or NAME removed when VALUE is NULL.
 * Applied in order; a later entry for a name wins.
 */
#define UA_ENV_MAX 16

struct ua_var {
	const char *name;	/* a string constant */
	char *value;		/* owned; NULL: remove NAME */
};

struct ua_env {
	unsigned int n;
	struct ua_var var[UA_ENV_MAX];
};

/*
 * Reads a variable of the environment being changed: NULL if unset.  The
 * result need only stay valid until the next call.
 */
typedef const char *(*ua_getenv_fn)(void *ctx, const char *name);

void ua_env_init(struct ua_env *e);
void ua_env_free(struct ua_env *e);

/* The value NAME has once E is applied over GET's environment. */
const char *ua_env_value(const struct ua_env *e, const char *name, ua_getenv_fn get, void *ctx);

/*
 * The environment of a protected program in mode M (on or require):
 * LD_PRELOAD = ADAPTERS[:PRELOAD]; with libummunot-ucx, UCX's hooks and
 * Open MPI's feed of its patcher into UCX off; in mode require,
 * UMMUNOT_REQUIRE=1.  -ENOMEM, or -ENOSPC when E is full.
 */
int ua_env_activate(struct ua_env *e, const char *adapters, enum ua_mode m, const char *preload);

/*
 * What undoes an activation of ADAPTERS that the environment GET reads
 * already carries (inherited from an activated parent): the ADAPTERS
 * block taken out of LD_PRELOAD (removed if nothing is left), and each
 * variable ua_env_activate() sets removed where it holds the value
 * activation gives it.  Nothing when LD_PRELOAD does not hold the block.
 * Returns the number of changes added, or a negative error.
 */
int ua_env_deactivate(struct ua_env *e, const char *adapters, ua_getenv_fn get, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
