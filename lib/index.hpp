// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// range_index: the registration cache's index of [start, end) ranges, a
// copy-on-write B+tree read under RCU.  See Documentation/library.rst
// ("The index").
//
//  * Every node holds up to `fanout` slots of three words: key (a leaf: the
//    entry's start; an inner node: the smallest start below that child),
//    aux (a leaf: the entry's end; an inner node: the largest end below
//    that child) and ptr (the entry, or the child).  Slots are sorted by
//    key; equal keys are allowed (two entries of one range with different
//    access).  aux makes it an interval tree: a search for "starts at or
//    before S, ends at or after E" skips every subtree whose largest end
//    is below E.
//  * Readers (any thread, inside an RCU read-side critical section) start
//    from the published root, root_.  They never write.
//  * One writer at a time (the cache's mutex) changes the working tree,
//    whose root is wroot_.  A node of an older epoch may be reachable from
//    root_, so it is never changed: the writer copies it (and the path
//    above it) first.  A node made in the current epoch is reachable from
//    wroot_ only, so it is changed in place: k changes between two
//    publishes copy each node once, and a batch of k invalidations costs
//    O(k log n), not O(k) copies of the path each.
//  * publish() makes wroot_ the published root (a release store) and
//    starts a new epoch.  Nodes replaced since the last publish are then
//    retired: readers that loaded the old root may still be in them, so
//    they are freed by free_retired() only after a grace period, which the
//    caller waits for.
//  * Allocation happens in reserve() only: it fills a small pool of spare
//    nodes, enough for one insert or erase at the current height.  After
//    it succeeded, insert() and erase() cannot fail; when it fails the
//    tree is unchanged.  Nodes freed after a grace period go back to the
//    pool, up to the tree's size: a cache that keeps missing
//    recycles the nodes its misses replace instead of calling malloc.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ummunot::detail {

struct entry;

class range_index {
public:
	static constexpr unsigned int fanout = 32;

	struct node {
		std::uint64_t epoch;	// writer only: the epoch that made it
		node *link;		// writer only: spare or retire list
		std::uint32_t n;	// slots used
		std::uint32_t height;	// 0: a leaf
		std::uint64_t key[fanout];
		std::uint64_t aux[fanout];
		void *ptr[fanout];

		entry *ent(unsigned int i) const { return static_cast<entry *>(ptr[i]); }
		node *child(unsigned int i) const { return static_cast<node *>(ptr[i]); }
		// The number of slots whose key is at most s: the branch-free
		// halving of a binary search (random keys make every branch of
		// a classic one a coin toss for the predictor).  Counting all
		// 32 keys instead (independent loads, but 32 scalar compares:
		// no 64-bit vector compare in the baseline ISA) measured about
		// 10% slower on the hit (bench/cache-hit).
		unsigned int upper(std::uint64_t s) const
		{
			if (n == 0)
				return 0;
			const std::uint64_t *base = key;
			unsigned int len = n;
			while (len > 1) {
				unsigned int half = len / 2;
				base = base[half] <= s ? base + half : base;
				len -= half;
			}
			return static_cast<unsigned int>(base - key) + (*base <= s);
		}
	};

	range_index() = default;
	~range_index();
	range_index(const range_index &) = delete;
	range_index &operator=(const range_index &) = delete;

	// Writer: an empty tree.  false when out of memory.
	bool init();

	// Readers, inside an RCU read-side critical section: the entries with
	// start <= s and end >= e, from the largest start down, until f(entry)
	// returns true; returns that entry or nullptr.  f may be called for
	// an entry of the published tree that the writer has since removed.
	template <class F>
	entry *find(std::uint64_t s, std::uint64_t e, F &&f) const
	{
		// Acquire: pairs with the release store in publish(): the
		// nodes (and the entries they name) are seen as they were
		// written before it.
		const node *root = root_.load(std::memory_order_acquire);
		// The rightmost candidate path first, without recursion: for a
		// hit it is the only one.
		const node *p = root;
		while (p->height) {
			unsigned int i = p->upper(s);
			while (i && p->aux[i - 1] < e)
				i--;
			// Below the root, no child here may qualify although the
			// parent's summary (which counts entries starting after
			// s) said one might: the rest of the tree still may.
			if (!i)
				goto rest;
			p = p->child(i - 1);
		}
		for (unsigned int i = p->upper(s); i-- > 0;)
			if (p->aux[i] >= e && f(p->ent(i)))
				return p->ent(i);
	rest:
		if (p == root)
			return nullptr;
		// The rest, the subtree p (searched) excepted.
		return find_in(root, s, e, f, p);
	}

	// The writer's view of the same: the working tree.
	template <class F>
	entry *find_working(std::uint64_t s, std::uint64_t e, F &&f) const
	{
		return find_in(wroot_, s, e, f, nullptr);
	}

	// Writer.  reserve() before each insert() or erase().
	bool reserve();
	void insert(std::uint64_t start, std::uint64_t end, entry *e);
	// Removes e (which starts at start) from the working tree: false if
	// it is not there.
	bool erase(std::uint64_t start, entry *e);
	// Publish the working tree.  No-op if nothing changed.
	void publish();
	// The bytes retired by publish() and not yet freed.
	std::size_t retired_bytes() const { return retired_nodes_ * sizeof(node); }
	// The retired nodes, detached so that a grace period can be waited
	// for without the writer's lock; after it (under the lock again)
	// free_retired() frees them or keeps them as spares (trim: keep only
	// a few).
	struct retired_batch {
		node *list = nullptr;
		std::size_t nodes = 0;
	};
	retired_batch take_retired();
	void free_retired(retired_batch b, bool trim);
	// Both steps at once (a grace period has passed already).
	void free_retired(bool trim = false) { free_retired(take_retired(), trim); }

	// Writer: the number of entries, the bytes of the working tree.
	std::size_t size() const { return size_; }
	std::size_t bytes() const { return nodes_ * sizeof(node); }
	std::uint32_t height() const { return wroot_ ? wroot_->height : 0; }

	// Writer: every entry of the working tree in order, f(start, end, e).
	template <class F>
	void for_each(F &&f) const
	{
		if (wroot_)
			for_each_in(wroot_, f);
	}

	// Writer (tests): 0 if the working tree's invariants hold, else a line
	// number in index.cpp.
	int check() const;

private:
	// The search, recursive, from the largest start down; the subtree
	// skip (already searched) excepted.
	template <class F>
	static entry *find_in(const node *nd, std::uint64_t s, std::uint64_t e, F &f,
			      const node *skip)
	{
		if (nd == skip)
			return nullptr;
		for (unsigned int i = nd->upper(s); i-- > 0;) {
			if (nd->aux[i] < e)
				continue;
			if (nd->height == 0) {
				if (f(nd->ent(i)))
					return nd->ent(i);
			} else if (entry *r = find_in(nd->child(i), s, e, f, skip)) {
				return r;
			}
		}
		return nullptr;
	}

	template <class F>
	static void for_each_in(const node *nd, F &f)
	{
		for (unsigned int i = 0; i < nd->n; i++) {
			if (nd->height == 0)
				f(nd->key[i], nd->aux[i], nd->ent(i));
			else
				for_each_in(nd->child(i), f);
		}
	}

	node *take();
	void drop(node *nd);
	node *mut(node *nd);
	node *insert_in(node *nd, std::uint64_t start, std::uint64_t end, void *p);
	bool find_path(const node *nd, std::uint64_t start, const entry *e,
		       unsigned int *path) const;
	void fix_child(node *parent, unsigned int i);
	static void set_slot(node *nd, unsigned int i, std::uint64_t k, std::uint64_t a, void *p);
	static void summary(const node *nd, std::uint64_t *k, std::uint64_t *a);
	int check_in(const node *nd, std::uint64_t *k, std::uint64_t *a, std::size_t *count,
		     bool root) const;
	void free_tree(node *nd);
	static void free_node(node *nd);

	// Read on the hit path.  Not aligned here: the cache puts it on the
	// cache line of the other words its hits read.
	std::atomic<node *> root_{nullptr};

	// Writer state.
	alignas(64) node *wroot_ = nullptr;
	std::uint64_t epoch_ = 1;
	bool dirty_ = false;
	node *spare_ = nullptr;			// free nodes (unreachable)
	std::size_t nr_spare_ = 0;
	node *replaced_ = nullptr;		// old nodes replaced since publish
	std::size_t nr_replaced_ = 0;
	node *retired_ = nullptr;		// unpublished: wait for a grace period
	std::size_t retired_nodes_ = 0;
	std::size_t nodes_ = 0;			// in the working tree
	std::size_t size_ = 0;
};

} // namespace ummunot::detail
