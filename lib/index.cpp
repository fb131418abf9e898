// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// range_index: the writer side.  See index.hpp.
#include "index.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace ummunot::detail {

namespace {

// Heights beyond this are refused by reserve() (a tree of 32-slot nodes
// with at least 8 slots a node reaches it past 8^30 entries).
constexpr std::uint32_t max_height = 30;

constexpr unsigned int min_fill = range_index::fanout / 4;

void remove_at(range_index::node *nd, unsigned int i)
{
	unsigned int m = nd->n - i - 1;
	std::memmove(&nd->key[i], &nd->key[i + 1], m * sizeof(nd->key[0]));
	std::memmove(&nd->aux[i], &nd->aux[i + 1], m * sizeof(nd->aux[0]));
	std::memmove(&nd->ptr[i], &nd->ptr[i + 1], m * sizeof(nd->ptr[0]));
	nd->n--;
}

void open_at(range_index::node *nd, unsigned int i)
{
	unsigned int m = nd->n - i;
	std::memmove(&nd->key[i + 1], &nd->key[i], m * sizeof(nd->key[0]));
	std::memmove(&nd->aux[i + 1], &nd->aux[i], m * sizeof(nd->aux[0]));
	std::memmove(&nd->ptr[i + 1], &nd->ptr[i], m * sizeof(nd->ptr[0]));
	nd->n++;
}

// Move cnt slots from src[from] to the end of dst.
void move_to_end(range_index::node *dst, range_index::node *src, unsigned int from,
		 unsigned int cnt)
{
	std::memcpy(&dst->key[dst->n], &src->key[from], cnt * sizeof(src->key[0]));
	std::memcpy(&dst->aux[dst->n], &src->aux[from], cnt * sizeof(src->aux[0]));
	std::memcpy(&dst->ptr[dst->n], &src->ptr[from], cnt * sizeof(src->ptr[0]));
	dst->n += cnt;
}

} // namespace

range_index::~range_index()
{
	// No reader can be inside (the cache is being destroyed): every node
	// goes now.  Those reachable from root_ only are on replaced_.
	if (wroot_)
		free_tree(wroot_);
	for (node *l : {replaced_, retired_, spare_})
		while (l) {
			node *n = l->link;
			free_node(l);
			l = n;
		}
}

void range_index::free_node(node *nd)
{
	nd->~node();
	::operator delete(static_cast<void *>(nd));
}

void range_index::free_tree(node *nd)
{
	if (nd->height)
		for (unsigned int i = 0; i < nd->n; i++)
			free_tree(nd->child(i));
	free_node(nd);
}

bool range_index::init()
{
	if (!reserve())
		return false;
	wroot_ = take();
	wroot_->height = 0;
	// Release: pairs with the acquire in find().
	root_.store(wroot_, std::memory_order_release);
	epoch_++;
	return true;
}

bool range_index::reserve()
{
	std::uint32_t h = height();
	if (h >= max_height)
		return false;
	// Insert: the path copied (h + 1), a split at every level (h + 1) and
	// a new root.  Erase: the path and one sibling a level.
	std::size_t need = 2 * std::size_t(h) + 4;
	while (nr_spare_ < need) {
		void *mem = ::operator new(sizeof(node), std::nothrow);
		if (!mem)
			return false;
		node *nd = new (mem) node;
		nd->link = spare_;
		spare_ = nd;
		nr_spare_++;
	}
	return true;
}

// A spare node, now part of the working tree (reserve() made sure there is
// one).
range_index::node *range_index::take()
{
	node *nd = spare_;
	spare_ = nd->link;
	nr_spare_--;
	nd->epoch = epoch_;
	nd->link = nullptr;
	nd->n = 0;
	nodes_++;
	return nd;
}

// nd leaves the working tree.  Made in this epoch: nobody else ever saw it,
// it is spare at once.  Older: readers of the published root may be in it.
void range_index::drop(node *nd)
{
	nodes_--;
	if (nd->epoch == epoch_) {
		nd->link = spare_;
		spare_ = nd;
		nr_spare_++;
	} else {
		nd->link = replaced_;
		replaced_ = nd;
		nr_replaced_++;
	}
}

// nd, changeable: itself if made in this epoch, else a copy that replaces
// it (the caller stores it where nd was).
range_index::node *range_index::mut(node *nd)
{
	if (nd->epoch == epoch_)
		return nd;
	node *c = take();
	c->height = nd->height;
	move_to_end(c, nd, 0, nd->n);
	drop(nd);
	return c;
}

void range_index::set_slot(node *nd, unsigned int i, std::uint64_t k, std::uint64_t a, void *p)
{
	nd->key[i] = k;
	nd->aux[i] = a;
	nd->ptr[i] = p;
}

// The key and aux a parent keeps for nd: the smallest start, the largest
// end below it.
void range_index::summary(const node *nd, std::uint64_t *k, std::uint64_t *a)
{
	*k = nd->key[0];
	std::uint64_t m = 0;
	for (unsigned int i = 0; i < nd->n; i++)
		m = std::max(m, nd->aux[i]);
	*a = m;
}

void range_index::fix_child(node *parent, unsigned int i)
{
	summary(parent->child(i), &parent->key[i], &parent->aux[i]);
}

// nd is changeable.  Returns the new right half if nd split.
range_index::node *range_index::insert_in(node *nd, std::uint64_t start, std::uint64_t end,
					  void *p)
{
	unsigned int pos;
	std::uint64_t k = start, a = end;
	void *q = p;

	if (nd->height == 0) {
		pos = nd->upper(start);
	} else {
		unsigned int i = nd->upper(start);
		i = i ? i - 1 : 0;
		node *c = mut(nd->child(i));
		nd->ptr[i] = c;
		node *split = insert_in(c, start, end, p);
		fix_child(nd, i);
		if (!split)
			return nullptr;
		pos = i + 1;
		summary(split, &k, &a);
		q = split;
	}
	if (nd->n < fanout) {
		open_at(nd, pos);
		set_slot(nd, pos, k, a, q);
		return nullptr;
	}
	// Split.  Appending at the end (addresses registered in increasing
	// order) leaves the left node full rather than half full.
	node *r = take();
	r->height = nd->height;
	unsigned int keep = pos == fanout ? fanout : fanout / 2;
	move_to_end(r, nd, keep, fanout - keep);
	nd->n = keep;
	node *into = nd;
	if (pos > keep || pos == fanout) {
		into = r;
		pos -= keep;
	}
	open_at(into, pos);
	set_slot(into, pos, k, a, q);
	return r;
}

void range_index::insert(std::uint64_t start, std::uint64_t end, entry *e)
{
	wroot_ = mut(wroot_);
	node *split = insert_in(wroot_, start, end, e);
	if (split) {
		node *r = take();
		r->height = wroot_->height + 1;
		r->n = 2;
		r->ptr[0] = wroot_;
		r->ptr[1] = split;
		fix_child(r, 0);
		fix_child(r, 1);
		wroot_ = r;
	}
	size_++;
	dirty_ = true;
}

// path[level] = the slot taken at each level, from the root down to the
// entry's slot in its leaf.  Equal starts may span children: a child
// whose smallest start is start may have more of them to its left.
bool range_index::find_path(const node *nd, std::uint64_t start, const entry *e,
			    unsigned int *path) const
{
	unsigned int hi = nd->upper(start);

	if (nd->height == 0) {
		for (unsigned int i = hi; i-- > 0 && nd->key[i] == start;)
			if (nd->ptr[i] == e) {
				*path = i;
				return true;
			}
		return false;
	}
	for (unsigned int i = hi; i-- > 0;) {
		if (find_path(nd->child(i), start, e, path + 1)) {
			*path = i;
			return true;
		}
		if (nd->key[i] < start)
			break;
	}
	return false;
}

bool range_index::erase(std::uint64_t start, entry *e)
{
	unsigned int path[max_height + 1];
	node *stack[max_height + 1];

	if (!find_path(wroot_, start, e, path))
		return false;
	std::uint32_t h = wroot_->height;
	wroot_ = mut(wroot_);
	node *nd = wroot_;
	for (std::uint32_t level = 0; level < h; level++) {
		stack[level] = nd;
		node *c = mut(nd->child(path[level]));
		nd->ptr[path[level]] = c;
		nd = c;
	}
	remove_at(nd, path[h]);

	// Bottom up: drop empty nodes; merge a node under a quarter full
	// with a sibling when both fit in one, else even them out.
	for (std::uint32_t level = h; level-- > 0;) {
		node *p = stack[level];
		unsigned int i = path[level];
		node *c = p->child(i);
		if (c->n == 0) {
			drop(c);
			remove_at(p, i);
			continue;
		}
		if (c->n >= min_fill || p->n < 2) {
			fix_child(p, i);
			continue;
		}
		unsigned int l = i > 0 ? i - 1 : i, r = l + 1;
		node *L = mut(p->child(l));
		p->ptr[l] = L;
		node *R = p->child(r);
		if (L->n + R->n <= fanout) {
			move_to_end(L, R, 0, R->n);
			drop(R);
			remove_at(p, r);
			fix_child(p, l);
			continue;
		}
		R = mut(R);
		p->ptr[r] = R;
		unsigned int total = L->n + R->n, want = total / 2;
		if (L->n < want) {
			unsigned int m = want - L->n;
			move_to_end(L, R, 0, m);
			std::memmove(&R->key[0], &R->key[m], (R->n - m) * sizeof(R->key[0]));
			std::memmove(&R->aux[0], &R->aux[m], (R->n - m) * sizeof(R->aux[0]));
			std::memmove(&R->ptr[0], &R->ptr[m], (R->n - m) * sizeof(R->ptr[0]));
			R->n -= m;
		} else {
			unsigned int m = L->n - want;
			std::memmove(&R->key[m], &R->key[0], R->n * sizeof(R->key[0]));
			std::memmove(&R->aux[m], &R->aux[0], R->n * sizeof(R->aux[0]));
			std::memmove(&R->ptr[m], &R->ptr[0], R->n * sizeof(R->ptr[0]));
			std::memcpy(&R->key[0], &L->key[want], m * sizeof(R->key[0]));
			std::memcpy(&R->aux[0], &L->aux[want], m * sizeof(R->aux[0]));
			std::memcpy(&R->ptr[0], &L->ptr[want], m * sizeof(R->ptr[0]));
			R->n += m;
			L->n = want;
		}
		fix_child(p, l);
		fix_child(p, r);
	}
	// A root with one child gives way to it (wroot_ was made in this
	// epoch, so it is spare at once).
	while (wroot_->height > 0 && wroot_->n == 1) {
		node *old = wroot_;
		wroot_ = old->child(0);
		drop(old);
	}
	if (wroot_->height > 0 && wroot_->n == 0)
		wroot_->height = 0;
	size_--;
	dirty_ = true;
	return true;
}

void range_index::publish()
{
	if (!dirty_)
		return;
	// Release: every node of the working tree (and the entries named in
	// it) was written before; pairs with the acquire in find().
	root_.store(wroot_, std::memory_order_release);
	// What the old root reached and the new one does not: retired.
	while (replaced_) {
		node *n = replaced_->link;
		replaced_->link = retired_;
		retired_ = replaced_;
		retired_nodes_++;
		replaced_ = n;
	}
	nr_replaced_ = 0;
	epoch_++;
	dirty_ = false;
}

range_index::retired_batch range_index::take_retired()
{
	retired_batch b{retired_, retired_nodes_};
	retired_ = nullptr;
	retired_nodes_ = 0;
	return b;
}

void range_index::free_retired(retired_batch b, bool trim)
{
	// Retired nodes become spare ones, up to as many as the tree has (a
	// cache that keeps missing then calls malloc for almost no node, and
	// freeing thousands of 800-byte chunks at once costs glibc more than
	// the copies did); the rest are freed.  The pool never holds more
	// than one reclaim batch, so transient memory stays under twice the
	// steady one.  trim: keep only what one more update needs.
	std::size_t keep = 2 * std::size_t(height()) + 4 + (trim ? 0 : nodes_);
	while (node *nd = b.list) {
		b.list = nd->link;
		if (nr_spare_ < keep) {
			nd->link = spare_;
			spare_ = nd;
			nr_spare_++;
		} else {
			free_node(nd);
		}
	}
	while (nr_spare_ > keep) {
		node *n = spare_->link;
		free_node(spare_);
		spare_ = n;
		nr_spare_--;
	}
}

int range_index::check_in(const node *nd, std::uint64_t *k, std::uint64_t *a,
			  std::size_t *count, bool root) const
{
	if (nd->n > fanout || (!root && nd->n == 0) || nd->epoch > epoch_)
		return __LINE__;
	std::uint64_t m = 0;
	for (unsigned int i = 0; i < nd->n; i++) {
		if (i && nd->key[i - 1] > nd->key[i])
			return __LINE__;
		if (nd->height) {
			const node *c = nd->child(i);
			if (c->height + 1 != nd->height)
				return __LINE__;
			std::uint64_t ck, ca;
			if (int r = check_in(c, &ck, &ca, count, false))
				return r;
			if (ck != nd->key[i] || ca != nd->aux[i])
				return __LINE__;
			// The children's ranges of starts do not interleave.
			if (i + 1 < nd->n && c->key[c->n - 1] > nd->key[i + 1])
				return __LINE__;
		} else {
			if (nd->aux[i] < nd->key[i])
				return __LINE__;
			(*count)++;
		}
		m = std::max(m, nd->aux[i]);
	}
	*k = nd->n ? nd->key[0] : 0;
	*a = m;
	count[1]++;
	return 0;
}

int range_index::check() const
{
	if (!wroot_)
		return __LINE__;
	std::size_t count[2] = {0, 0};	// entries, nodes
	std::uint64_t k, a;
	if (int r = check_in(wroot_, &k, &a, count, true))
		return r;
	if (count[0] != size_ || count[1] != nodes_)
		return __LINE__;
	if (!dirty_ && root_.load(std::memory_order_relaxed) != wroot_)
		return __LINE__;
	return 0;
}

} // namespace ummunot::detail
