/* log.h: one-line log records to stderr, with syslog priorities for journald. */
#ifndef ECHOROUTERD_LOG_H
#define ECHOROUTERD_LOG_H

#include <stdarg.h>
#include <stdbool.h>

enum log_level {
	LOG_LEVEL_ERROR = 3,	/* values are the syslog priorities */
	LOG_LEVEL_WARNING = 4,
	LOG_LEVEL_NOTICE = 5,
	LOG_LEVEL_INFO = 6,
	LOG_LEVEL_DEBUG = 7,
};

/*
 * Sets up logging. With JOURNAL_STREAM in the environment each line starts
 * with its "<N>" syslog priority so that journald files it correctly.
 * Call once, before any thread starts. Any thread may log afterwards.
 */
void	log_init(enum log_level level);

/* Changes the level at run time (reload). Any thread. */
void	log_set_level(enum log_level level);
enum log_level log_get_level(void);
bool	log_is_debug(void);

/* Parses "error", "warning", "notice", "info", "debug"; -1 if unknown. */
int	log_level_parse(const char *name);
const char *log_level_name(enum log_level level);

/* log_warn and fatal append ": strerror(errno)"; the x forms do not. */
void	log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * A cap on the records clients can provoke (closes of slow consumers, of
 * protocol offenders, of SMPP binds that stopped answering): at most
 * LOG_LIMIT_PER_SECOND a second each; the rest are counted and reported in
 * one notice once their second is over. A flood of bad clients then costs
 * the log, and the thread writing it, little. One thread owns a limit;
 * zero-initialise it.
 */
#define LOG_LIMIT_PER_SECOND	20

struct log_limit {
	unsigned long long second;	/* of the records counted now */
	unsigned used;			/* written in that second */
	unsigned dropped;		/* not written, not yet reported */
};

/*
 * True if one more record may be written in second now (any clock of
 * whole seconds); counts it either way. who names the owner in the report
 * ("reactor=1").
 */
bool	log_limit_take(struct log_limit *l, unsigned long long now,
	    const char *who, unsigned id);

/* Reports records dropped in seconds before now. Once a second. */
void	log_limit_report(struct log_limit *l, unsigned long long now,
	    const char *who, unsigned id);

/* Start-up, configuration and broken invariants only: logs and exits 1. */
_Noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
