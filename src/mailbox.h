/*
 * mailbox.h: how threads post work to a thread that owns something: a
 * multi-producer queue of tasks and one eventfd wake-up per batch.
 *
 * Any thread pushes; only the owner takes. The queue is a lock-free stack
 * that the owner takes whole and reverses, so tasks run in the order each
 * producer posted them. Only a push into an empty mailbox writes the
 * eventfd: a burst costs the owner one wake-up (the invokeLater of the
 * Java designs, memcached's per-worker queue and eventfd).
 */
#ifndef ECHOROUTERD_MAILBOX_H
#define ECHOROUTERD_MAILBOX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* How a task is run: as asked, or only to clean up. */
enum mailbox_status {
	MAILBOX_RUN = 0,
	/*
	 * Its owner is going away and will not do the work (a reactor freed
	 * at exit, a service thread stopped): free what the task holds,
	 * answer nobody, touch nothing of the owner but what is said safe.
	 */
	MAILBOX_CANCELLED = -1,
};

/*
 * Work for the owner. owner is what the mailbox belongs to (a struct
 * reactor, a struct service): the task knows which kind it was posted to.
 */
typedef void mailbox_task_fn(void *owner, void *arg, enum mailbox_status st);

/* A mailbox entry. Embed it in what you post to avoid an allocation. */
struct mailbox_task {
	struct mailbox_task *next;
	mailbox_task_fn *fn;
	void	*arg;
};

struct mailbox {
	_Atomic(struct mailbox_task *) head;	/* newest first */
	int	evfd;				/* -1: none */
};

/* Makes the eventfd. 0, or -1 with errno. Before any thread uses mb. */
int	mailbox_init(struct mailbox *mb);

/*
 * Runs what is still queued with MAILBOX_CANCELLED and closes the eventfd.
 * No thread may push any more. A zeroed or failed mailbox is a no-op.
 */
void	mailbox_fini(struct mailbox *mb, void *owner);

/* The fd that becomes readable when tasks arrive: for the owner's poll. */
static inline int
mailbox_fd(const struct mailbox *mb)
{
	return mb->evfd;
}

/*
 * Pushes the chain head..tail (linked by next, newest first: tail is the
 * oldest) and wakes the owner if the mailbox was empty. Any thread.
 */
void	mailbox_push(struct mailbox *mb, struct mailbox_task *head,
	    struct mailbox_task *tail);

/* Pushes one task t (its fn and arg set). Any thread. */
static inline void
mailbox_post(struct mailbox *mb, struct mailbox_task *t)
{
	mailbox_push(mb, t, t);
}

/*
 * Posts fn(owner, arg, status) in an entry it allocates and frees. Any
 * thread.
 */
void	mailbox_post_fn(struct mailbox *mb, mailbox_task_fn *fn, void *arg);

/*
 * Takes the eventfd's count and then every task queued: the owner runs
 * them. Reading the eventfd first means a push that finds the mailbox
 * empty after our take writes it again, so no wake-up is lost. Returns
 * how many ran. Owner only.
 */
unsigned mailbox_drain(struct mailbox *mb, void *owner,
	    enum mailbox_status st);

/*
 * Runs the chain t, in its link order, with st and owner. Owner only.
 * reactor_publish also uses it to cancel tasks staged for a reactor that
 * is gone: then owner is the sending reactor and the order newest first,
 * which a cancelled task must not rely on.
 */
unsigned mailbox_run_chain(struct mailbox_task *t, void *owner,
	    enum mailbox_status st);

/* Whether nothing is queued now. Any thread; a hint only. */
static inline bool
mailbox_is_empty(struct mailbox *mb)
{
	return atomic_load_explicit(&mb->head, memory_order_relaxed) == NULL;
}

#endif
