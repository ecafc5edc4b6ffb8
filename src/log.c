/* log.c: formats each record into one buffer and writes it with one write(2). */
#include "log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_LINE_MAX 1024

static _Atomic int log_level = LOG_LEVEL_INFO;
static bool log_journal;

static const char *const log_names[] = {
	[LOG_LEVEL_ERROR] = "error",
	[LOG_LEVEL_WARNING] = "warning",
	[LOG_LEVEL_NOTICE] = "notice",
	[LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_DEBUG] = "debug",
};

/*
 * systemd sets JOURNAL_STREAM to "DEVICE:INODE" of the stream it connected
 * to the journal. It is inherited, so it counts only if stderr is still
 * that stream (not, say, redirected to a file by a script run from a unit).
 */
static bool
stderr_is_journal(void)
{
	const char *v = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (v == NULL || sscanf(v, "%llu:%llu", &dev, &ino) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino;
}

void
log_init(enum log_level level)
{
	log_journal = stderr_is_journal();
	atomic_store(&log_level, level);
}

void
log_set_level(enum log_level level)
{
	atomic_store_explicit(&log_level, level, memory_order_relaxed);
}

enum log_level
log_get_level(void)
{
	return atomic_load_explicit(&log_level, memory_order_relaxed);
}

bool
log_is_debug(void)
{
	return log_get_level() >= LOG_LEVEL_DEBUG;
}

int
log_level_parse(const char *name)
{
	for (int i = LOG_LEVEL_ERROR; i <= LOG_LEVEL_DEBUG; i++)
		if (strcasecmp(name, log_names[i]) == 0)
			return i;
	return -1;
}

const char *
log_level_name(enum log_level level)
{
	if (level < LOG_LEVEL_ERROR || level > LOG_LEVEL_DEBUG)
		return "?";
	return log_names[level];
}

/* errnum < 0: no strerror suffix. */
static void
log_vrecord(enum log_level level, int errnum, const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];
	size_t n = 0;
	int r;

	if (level > log_get_level())
		return;
	if (log_journal)
		n = (size_t)snprintf(line, sizeof(line), "<%d>", level);
	else if (level <= LOG_LEVEL_WARNING)
		n = (size_t)snprintf(line, sizeof(line), "%s: ",
		    log_names[level]);
	r = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	if (r > 0)
		n += (size_t)r;
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	if (errnum >= 0) {
		r = snprintf(line + n, sizeof(line) - n, ": %s",
		    strerror(errnum));
		if (r > 0)
			n += (size_t)r;
		if (n > sizeof(line) - 2)
			n = sizeof(line) - 2;
	}
	line[n++] = '\n';
	/* One write per record keeps lines whole between threads. */
	while (write(STDERR_FILENO, line, n) < 0 && errno == EINTR)
		;
}

#define LOG_DEFINE(fn, level, with_errno)				\
	void								\
	fn(const char *fmt, ...)					\
	{								\
		int saved = errno;					\
		va_list ap;						\
		va_start(ap, fmt);					\
		log_vrecord(level, with_errno ? saved : -1, fmt, ap);	\
		va_end(ap);						\
		errno = saved;						\
	}

LOG_DEFINE(log_debug, LOG_LEVEL_DEBUG, false)
LOG_DEFINE(log_info, LOG_LEVEL_INFO, false)
LOG_DEFINE(log_notice, LOG_LEVEL_NOTICE, false)
LOG_DEFINE(log_warn, LOG_LEVEL_WARNING, true)
LOG_DEFINE(log_warnx, LOG_LEVEL_WARNING, false)
LOG_DEFINE(log_err, LOG_LEVEL_ERROR, false)

void
log_limit_report(struct log_limit *l, unsigned long long now,
    const char *who, unsigned id)
{
	if (l->dropped == 0 || now == l->second)
		return;
	log_notice("%s=%u: client records not logged: %u (over %u a second)",
	    who, id, l->dropped, LOG_LIMIT_PER_SECOND);
	l->dropped = 0;
}

bool
log_limit_take(struct log_limit *l, unsigned long long now, const char *who,
    unsigned id)
{
	if (now != l->second) {
		log_limit_report(l, now, who, id);
		l->second = now;
		l->used = 0;
	}
	if (l->used < LOG_LIMIT_PER_SECOND) {
		l->used++;
		return true;
	}
	l->dropped++;
	return false;
}

void
fatal(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_vrecord(LOG_LEVEL_ERROR, saved, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vrecord(LOG_LEVEL_ERROR, -1, fmt, ap);
	va_end(ap);
	exit(1);
}
