/* mailbox.c: the multi-producer task queue with an eventfd that threads post to. */
#include "mailbox.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util.h"

int
mailbox_init(struct mailbox *mb)
{
	atomic_init(&mb->head, NULL);
	mb->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return mb->evfd < 0 ? -1 : 0;
}

void
mailbox_fini(struct mailbox *mb, void *owner)
{
	int saved = errno;

	/* Tasks may post more as they clean up (answers): run those too. */
	while (!mailbox_is_empty(mb))
		mailbox_drain(mb, owner, MAILBOX_CANCELLED);
	if (mb->evfd >= 0)
		close(mb->evfd);
	mb->evfd = -1;
	errno = saved;
}

void
mailbox_push(struct mailbox *mb, struct mailbox_task *head,
    struct mailbox_task *tail)
{
	struct mailbox_task *old = atomic_load_explicit(&mb->head,
	    memory_order_relaxed);
	uint64_t one = 1;

	do {
		tail->next = old;
	} while (!atomic_compare_exchange_weak_explicit(&mb->head, &old,
	    head, memory_order_release, memory_order_relaxed));
	if (old != NULL)
		return;		/* not empty: a wake-up is already owed */
	while (write(mb->evfd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

/* An entry mailbox_post_fn allocated around the caller's fn and arg. */
struct heap_task {
	struct mailbox_task task;
	mailbox_task_fn *fn;
	void	*arg;
};

static void
heap_task_run(void *owner, void *arg, enum mailbox_status st)
{
	struct heap_task *ht = arg;

	ht->fn(owner, ht->arg, st);
	free(ht);
}

void
mailbox_post_fn(struct mailbox *mb, mailbox_task_fn *fn, void *arg)
{
	struct heap_task *ht = xmalloc(sizeof(*ht));

	ht->fn = fn;
	ht->arg = arg;
	ht->task.fn = heap_task_run;
	ht->task.arg = ht;
	mailbox_post(mb, &ht->task);
}

unsigned
mailbox_run_chain(struct mailbox_task *t, void *owner,
    enum mailbox_status st)
{
	struct mailbox_task *next;
	unsigned n = 0;

	for (; t != NULL; t = next, n++) {
		next = t->next;	/* the task may free itself */
		t->fn(owner, t->arg, st);
	}
	return n;
}

unsigned
mailbox_drain(struct mailbox *mb, void *owner, enum mailbox_status st)
{
	struct mailbox_task *t, *next, *fifo = NULL;
	uint64_t v;

	if (mb->evfd >= 0)
		while (read(mb->evfd, &v, sizeof(v)) < 0 && errno == EINTR)
			;
	t = atomic_exchange_explicit(&mb->head, NULL, memory_order_acquire);
	/* A stack: reversed, the tasks run in the order they were posted. */
	for (; t != NULL; t = next) {
		next = t->next;
		t->next = fifo;
		fifo = t;
	}
	return mailbox_run_chain(fifo, owner, st);
}
