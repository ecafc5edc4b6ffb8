/* smpp_acct.c: the SMPP accounts' binds and max_tps buckets, shared by every reactor. */
#include "smpp_acct.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "smpp_pdu.h"
#include "util.h"

/* An account's binds and bucket. */
struct smpp_acct {
	struct smpp_acct *next;
	char	id[16];
	unsigned binds;
	unsigned by_type[3];		/* tx, rx, trx (smpp_bind_type) */
	double	tokens;
	uint64_t last_ns;
};

static pthread_mutex_t acct_lock = PTHREAD_MUTEX_INITIALIZER;
static struct smpp_acct *accts;

static struct smpp_acct *
acct_find_locked(const char *id)
{
	struct smpp_acct *a;

	for (a = accts; a != NULL; a = a->next)
		if (strcmp(a->id, id) == 0)
			return a;
	return NULL;
}

/* id's entry, made (with no binds, a full bucket) if it has none. */
static struct smpp_acct *
acct_get_locked(const char *id)
{
	struct smpp_acct *a = acct_find_locked(id);

	if (a == NULL) {
		a = xcalloc(1, sizeof(*a));
		snprintf(a->id, sizeof(a->id), "%s", id);
		a->tokens = -1;		/* a full bucket at first use */
		a->next = accts;
		accts = a;
	}
	return a;
}

bool
smpp_acct_bind(const char *id, unsigned max, unsigned type)
{
	struct smpp_acct *a;
	bool ok = true;

	pthread_mutex_lock(&acct_lock);
	a = acct_get_locked(id);
	if (a->binds >= max)
		ok = false;
	else {
		a->binds++;
		a->by_type[type]++;
	}
	pthread_mutex_unlock(&acct_lock);
	return ok;
}

void
smpp_acct_unbind(const char *id, unsigned type)
{
	struct smpp_acct **pa, *a = NULL;

	pthread_mutex_lock(&acct_lock);
	for (pa = &accts; *pa != NULL; pa = &(*pa)->next) {
		if (strcmp((*pa)->id, id) != 0)
			continue;
		(*pa)->by_type[type]--;
		/*
		 * The last bind gone: forget the account, unless it has a
		 * max_tps bucket in use. Dropped, the next bind would start
		 * with a full one, and unbind-rebind would beat the limit.
		 * (Only configured accounts have max_tps: few of them.)
		 */
		if (--(*pa)->binds == 0 && (*pa)->tokens < 0) {
			a = *pa;
			*pa = a->next;
		}
		break;
	}
	pthread_mutex_unlock(&acct_lock);
	free(a);
}

unsigned
smpp_bind_type(uint32_t command_id)
{
	return command_id == SMPP_BIND_TRANSMITTER ? 0 :
	    command_id == SMPP_BIND_RECEIVER ? 1 : 2;
}

void
smpp_binds_each(smpp_binds_fn *fn, void *arg)
{
	static const char *const types[3] = { "transmitter", "receiver",
	    "transceiver" };

	pthread_mutex_lock(&acct_lock);
	for (struct smpp_acct *a = accts; a != NULL; a = a->next)
		for (unsigned t = 0; t < 3; t++)
			if (a->by_type[t] > 0)
				fn(a->id, types[t], a->by_type[t], arg);
	pthread_mutex_unlock(&acct_lock);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool
smpp_acct_take_token_any(const char *id, unsigned tps)
{
	pthread_mutex_lock(&acct_lock);
	acct_get_locked(id);
	pthread_mutex_unlock(&acct_lock);
	return smpp_acct_take_token(id, tps);
}

bool
smpp_acct_take_token(const char *id, unsigned tps)
{
	struct smpp_acct *a;
	uint64_t now = now_ns();
	bool ok = true;

	pthread_mutex_lock(&acct_lock);
	if ((a = acct_find_locked(id)) != NULL) {
		if (a->tokens < 0)
			a->tokens = tps;
		else
			a->tokens += (double)(now - a->last_ns) * tps / 1e9;
		if (a->tokens > tps)
			a->tokens = tps;
		a->last_ns = now;
		if (a->tokens >= 1)
			a->tokens -= 1;
		else
			ok = false;
	}
	pthread_mutex_unlock(&acct_lock);
	return ok;
}
