/*
 * match.c: routes' conditions and rewrites for one request (match.h).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "worker/core/match.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "common/config_match.h"
#include "common/err.h"
#include "common/log.h"
#include "shm/route_match.h"
#include "worker/core/core.h"

/* A backtracking regex a client can drive to its worst case is cut here:
 * counted as no match (weir_errors_total{kind="regex_limit"}), never a
 * worker stalled. PCRE2's default is 10,000,000. */
#define MATCH_LIMIT 100000
#define MATCH_DEPTH 10000

/* A piece of a rewrite's replacement: <len> bytes of its text at <off>,
 * or group <group>'s capture. */
#define SEG_TEXT UINT16_MAX
struct rw_seg {
	uint16_t group;
	uint16_t len;
	uint32_t off;
};

/* The compiled regexes of one generation. */
struct match_set {
	uint64_t id; /* the generation's id; 0: empty */
	uint32_t n;
	pcre2_code **code; /* n of them; NULL where one did not compile */
	/* a rewrite regex's replacement cut into pieces once, so a request
	 * costs a match and copies, not pcre2_substitute's parse of the
	 * replacement each time; nseg[i] 0: not a rewrite's regex, or one
	 * left to pcre2_substitute (a name that is not unique) */
	struct rw_seg **seg;
	uint16_t *nseg;
};

static struct {
	struct match_set set[2]; /* the two generations met last */
	pcre2_match_data *md;
	uint32_t md_pairs;       /* what md holds */
	pcre2_match_context *mctx;
	char out[2][MATCH_TARGET_MAX + 1]; /* the rewrite's steps */
} mw;

static void set_free(struct match_set *s)
{
	for (uint32_t i = 0; i < s->n; i++) {
		pcre2_code_free(s->code[i]);
		if (s->seg)
			free(s->seg[i]);
	}
	free(s->code);
	free(s->seg);
	free(s->nseg);
	memset(s, 0, sizeof *s);
}

/*
 * Cuts replacement <rep> (<len> bytes, as config_match.c checked it: $n,
 * ${n}, $name, ${name}, $$) for <code> into s->seg[i]. Leaves nseg[i] 0
 * (pcre2_substitute does it) when a name is not unique or memory lacks.
 */
static void set_cut(struct match_set *s, uint32_t i, const char *rep, size_t len)
{
	struct rw_seg *v = calloc(len + 1, sizeof *v); /* at most a piece a byte */
	uint16_t n = 0;

	if (!v || !s->code[i])
		goto fallback;
	for (size_t p = 0; p < len;) {
		if (rep[p] == '$' && p + 1 < len && rep[p + 1] == '$') { /* "$$": one '$' */
			v[n++] = (struct rw_seg){.group = SEG_TEXT, .len = 1, .off = (uint32_t)p + 1};
			p += 2;
			continue;
		}
		if (rep[p] != '$') {
			size_t q = p + 1;

			while (q < len && rep[q] != '$')
				q++;
			v[n++] = (struct rw_seg){.group = SEG_TEXT, .len = (uint16_t)(q - p), .off = (uint32_t)p};
			p = q;
			continue;
		}
		{
			int brace = p + 1 < len && rep[p + 1] == '{';
			size_t a = p + 1 + (size_t)brace, b = a;
			char name[64];
			int g;

			while (b < len && b - a < sizeof name - 1 &&
			       (rep[b] == '_' || (rep[b] >= '0' && rep[b] <= '9') || (rep[b] >= 'a' && rep[b] <= 'z') ||
			        (rep[b] >= 'A' && rep[b] <= 'Z')))
				b++;
			memcpy(name, rep + a, b - a);
			name[b - a] = '\0';
			if (b == a)
				goto fallback;
			g = name[0] >= '0' && name[0] <= '9' ? atoi(name)
			                                     : pcre2_substring_number_from_name(s->code[i], (PCRE2_SPTR)name);
			if (g < 0 || g >= SEG_TEXT)
				goto fallback;
			v[n++] = (struct rw_seg){.group = (uint16_t)g};
			p = b + (size_t)brace;
		}
	}
	if (!n) /* cannot be: a replacement starts with '/' or '$' */
		goto fallback;
	s->seg[i] = v;
	s->nseg[i] = n;
	return;
fallback:
	free(v);
}

/* Compiles <t>'s regexes into <s>, with the options config_match.c checked
 * them with. A failure (memory: the master compiled each) leaves a NULL
 * code, which never matches and makes a rewrite fail: logged. */
static void set_compile(struct match_set *s, const struct route_table *t)
{
	uint32_t pairs = mw.md_pairs, jit = 0;

	set_free(s);
	s->code = calloc(t->nregexes, sizeof *s->code);
	s->n = s->code ? t->nregexes : 0;
	s->id = t->id;
	if (!mw.mctx && (mw.mctx = pcre2_match_context_create(NULL)) != NULL) {
		pcre2_set_match_limit(mw.mctx, MATCH_LIMIT);
		pcre2_set_depth_limit(mw.mctx, MATCH_DEPTH);
	}
	for (uint32_t i = 0; i < s->n; i++) {
		const struct route_regex *rx = &route_regexes(t)[i];
		int err;
		PCRE2_SIZE off;
		uint32_t cap = 0;

		s->code[i] = pcre2_compile((PCRE2_SPTR)route_mstring(t, rx->off), rx->len, 0, &err, &off, NULL);
		if (!s->code[i]) {
			log_error("route regex \"%s\" did not compile in this worker: it never matches",
			          route_mstring(t, rx->off));
			continue;
		}
		/* without the JIT (a kernel refusing executable memory) the
		 * interpreter runs the same code, slower */
		jit += pcre2_jit_compile(s->code[i], PCRE2_JIT_COMPLETE) == 0;
		pcre2_pattern_info(s->code[i], PCRE2_INFO_CAPTURECOUNT, &cap);
		if (cap + 1 > pairs)
			pairs = cap + 1;
	}
	log_info("%u route regex(es) of generation %llu compiled, %u with the JIT", s->n, (unsigned long long)t->id,
	         jit);
	s->seg = s->n ? calloc(s->n, sizeof *s->seg) : NULL;
	s->nseg = s->n ? calloc(s->n, sizeof *s->nseg) : NULL;
	for (uint32_t k = 0; s->seg && s->nseg && k < t->nmatches; k++) {
		const struct route_match *m = &route_matches(t)[k];

		if (m->rw_regex != ROUTE_NONE && m->rw_regex < s->n)
			set_cut(s, m->rw_regex, route_mstring(t, m->rw_replace_off), m->rw_replace_len);
	}
	if (!s->code && t->nregexes)
		log_error("no memory for the %u route regex(es) of generation %llu: they never match", t->nregexes,
		          (unsigned long long)t->id);
	if (pairs > mw.md_pairs || !mw.md) {
		pcre2_match_data_free(mw.md);
		mw.md = pcre2_match_data_create(pairs ? pairs : 1, NULL);
		mw.md_pairs = mw.md ? (pairs ? pairs : 1) : 0;
	}
}

/* The codes of <t>'s generation, compiled on first sight. */
static struct match_set *set_for(const struct route_table *t)
{
	struct match_set *s;

	if (mw.set[0].id == t->id)
		return &mw.set[0];
	if (mw.set[1].id == t->id)
		return &mw.set[1];
	/* the older of the two goes */
	s = mw.set[0].id < mw.set[1].id ? &mw.set[0] : &mw.set[1];
	set_compile(s, t);
	return s;
}

void match_prepare(const struct route_table *t)
{
	if (t && t->nregexes)
		set_for(t);
}

/* Whether regex <i> of <t> matches <p>[0..n): 1, 0, or 0 counted when it
 * gave up at a limit. */
static int regex_ok(const struct route_table *t, uint32_t i, const char *p, size_t n)
{
	struct match_set *s = set_for(t);
	int rc;

	if (i >= s->n || !s->code[i] || !mw.md)
		return 0;
	rc = pcre2_match(s->code[i], (PCRE2_SPTR)p, n, 0, 0, mw.md, mw.mctx);
	if (rc >= 0)
		return 1;
	if (rc != PCRE2_ERROR_NOMATCH) {
		worker_count_error(WEIR_ERR(REGEX_LIMIT));
		log_warn("route regex \"%s\" gave up on a request (%d): taken as no match",
		         route_mstring(t, route_regexes(t)[i].off), rc);
	}
	return 0;
}

/* Whether <v>[0..n) meets condition <c> (not PRESENT or ABSENT). */
static int value_ok(const struct route_table *t, const struct route_mcond *c, const char *v, size_t n)
{
	const char *want = route_mstring(t, c->value_off);

	switch (c->op) {
	case MATCH_EXACT:
		return n == c->value_len && memcmp(v, want, n) == 0;
	case MATCH_PREFIX:
		return n >= c->value_len && memcmp(v, want, c->value_len) == 0;
	default:
		return regex_ok(t, c->regex, v, n);
	}
}

static int name_ieq(const char *a, size_t n, const char *lower, size_t ln)
{
	if (n != ln)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char x = (unsigned char)a[i];

		if ((x >= 'A' && x <= 'Z' ? x + 32 : x) != (unsigned char)lower[i])
			return 0;
	}
	return 1;
}

/* A header condition: met by any header of that name (present: by one
 * being there; absent: by none). */
static int header_ok(const struct txn *tx, const struct route_table *t, const struct route_mcond *c)
{
	const char *name = route_mstring(t, c->name_off);

	for (uint32_t i = 0; i < tx->req.hl.n; i++) {
		const struct hdr *h = &tx->req.hl.v[i];

		if (!name_ieq(h->name, h->name_len, name, c->name_len))
			continue;
		if (c->op == MATCH_PRESENT || c->op == MATCH_ABSENT)
			return c->op == MATCH_PRESENT;
		if (value_ok(t, c, h->value, h->value_len))
			return 1;
	}
	return c->op == MATCH_ABSENT;
}

/* A query condition, over the arguments as sent (not percent-decoded):
 * "a=1&b&c=" has a = "1", b = "" and c = "". */
static int query_ok(const struct txn *tx, const struct route_table *t, const struct route_mcond *c)
{
	const char *name = route_mstring(t, c->name_off);
	const char *p = tx->req.path_end, *end = tx->req.target + tx->req.target_len;

	if (p >= end || *p != '?')
		return c->op == MATCH_ABSENT;
	for (p++; p <= end;) {
		const char *amp = memchr(p, '&', (size_t)(end - p)), *stop = amp ? amp : end;
		const char *eq = memchr(p, '=', (size_t)(stop - p));
		size_t nlen = (size_t)((eq ? eq : stop) - p);

		if (nlen == c->name_len && memcmp(p, name, nlen) == 0) {
			if (c->op == MATCH_PRESENT || c->op == MATCH_ABSENT)
				return c->op == MATCH_PRESENT;
			if (eq ? value_ok(t, c, eq + 1, (size_t)(stop - eq - 1)) : value_ok(t, c, "", 0))
				return 1;
		}
		if (!amp)
			break;
		p = amp + 1;
	}
	return c->op == MATCH_ABSENT;
}

int match_cond(void *ctx, const struct route_table *t, const struct route_entry *e)
{
	const struct txn *tx = ctx;
	const struct route_match *m = route_match_of(t, e);
	const struct route_mcond *cs;

	if (!m)
		return 1;
	if (m->methods && !(m->methods >> (unsigned)tx->req.method_id & 1))
		return 0;
	cs = &route_mconds(t)[m->first_cond];
	/* the cheap byte compares first, the regexes last */
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t k = 0; k < m->ncond; k++) {
			const struct route_mcond *c = &cs[k];

			if ((c->op == MATCH_REGEX) != pass)
				continue;
			if (!(c->where == MATCH_HEADER ? header_ok(tx, t, c) : query_ok(tx, t, c)))
				return 0;
		}
	if (m->path_regex != ROUTE_NONE &&
	    !regex_ok(t, m->path_regex, tx->req.target, (size_t)(tx->req.path_end - tx->req.target)))
		return 0;
	return 1;
}

/* ---- rewrite --------------------------------------------------------- */

static int hexdig(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* An origin-form path (RFC 9112 3.2.1, RFC 3986 3.3): '/', then pchars and
 * '/', '%' with two hex digits, and no "." or ".." segment (the upstream
 * would resolve it: the request was normalised, its rewrite must stay so). */
static int path_ok(const char *p, size_t n)
{
	if (!n || p[0] != '/')
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c <= 0x20 || c >= 0x7f || c == '?' || c == '#' || c == '\\' || c == '"' || c == '<' || c == '>' ||
		    c == '^' || c == '`' || c == '{' || c == '|' || c == '}')
			return 0;
		if (c == '%' && (i + 2 >= n || !hexdig((unsigned char)p[i + 1]) || !hexdig((unsigned char)p[i + 2])))
			return 0;
		if (c == '/' && i + 1 < n && p[i + 1] == '.') {
			size_t k = i + 2;

			if (k < n && p[k] == '.')
				k++;
			if (k == n || p[k] == '/')
				return 0;
		}
	}
	return 1;
}

/*
 * pcre2_substitute() for a replacement cut by set_cut(): the first match
 * of regex <i> in <a>[0..n) replaced by <rep> (the text the pieces point
 * into) in <out> (*<outlen>: its room, then
 * the bytes written). Returns as pcre2_substitute does: 1 replaced, 0 no
 * match (nothing written), PCRE2_ERROR_NOMEMORY past the room, or the
 * match's error.
 */
static int rewrite_cut(const struct match_set *s, uint32_t i, const char *rep, const char *a, size_t n, char *out,
                       size_t *outlen)
{
	const struct rw_seg *v = s->seg[i];
	PCRE2_SIZE *ov;
	size_t w = 0, cap = *outlen;
	int rc = pcre2_match(s->code[i], (PCRE2_SPTR)a, n, 0, 0, mw.md, mw.mctx);

	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	if (rc <= 0) /* 0: an ovector too small, which md is sized not to be */
		return rc < 0 ? rc : PCRE2_ERROR_NOMEMORY;
	ov = pcre2_get_ovector_pointer(mw.md);
#define PUT(p, k)                                                                                                       \
	do {                                                                                                           \
		if (w + (k) > cap)                                                                                     \
			return PCRE2_ERROR_NOMEMORY;                                                                   \
		memcpy(out + w, (p), (k));                                                                             \
		w += (k);                                                                                              \
	} while (0)
	PUT(a, ov[0]);
	for (uint16_t k = 0; k < s->nseg[i]; k++) {
		if (v[k].group == SEG_TEXT) {
			PUT(rep + v[k].off, v[k].len);
		} else if (v[k].group < rc && ov[2 * v[k].group] != PCRE2_UNSET) {
			/* a group that took no part is empty (PCRE2_SUBSTITUTE_UNSET_EMPTY) */
			PUT(a + ov[2 * v[k].group], ov[2 * v[k].group + 1] - ov[2 * v[k].group]);
		}
	}
	PUT(a + ov[1], n - ov[1]);
#undef PUT
	*outlen = w;
	return 1;
}

static int rewrite_fail(struct txn *t, int rc, const char *why)
{
	log_warn("%s: the rewrite of route %s%s %s; answering %d", t->c->peer, route_host(t->table, t->route),
	         route_label(t->table, t->route), why, rc == WEIR_ERR(REWRITE_TOO_LONG) ? 414 : 500);
	return rc;
}

int match_rewrite(struct txn *t, const char **out, uint32_t *len)
{
	const struct route_match *m = route_match_of(t->table, t->route);
	const char *path = t->req.target, *q = t->req.path_end;
	size_t plen = (size_t)(q - path), qlen = t->req.target_len - plen, n;
	char *a = mw.out[0], *b = mw.out[1];

	*out = NULL;
	if (!m || (!m->strip_len && m->rw_regex == ROUTE_NONE))
		return 0;
	/* strip_prefix: the route's path (or a prefix of it) is a prefix of
	 * this path, since the route matched; what is left gets its '/' */
	if (m->strip_len && m->strip_len <= plen) {
		path += m->strip_len;
		plen -= m->strip_len;
	}
	if (plen + 1 > MATCH_TARGET_MAX)
		return rewrite_fail(t, WEIR_ERR(REWRITE_TOO_LONG), "passes 4 KiB");
	n = 0;
	if (!plen || path[0] != '/')
		a[n++] = '/';
	memcpy(a + n, path, plen);
	n += plen;
	if (m->rw_regex != ROUTE_NONE) {
		struct match_set *s = set_for(t->table);
		PCRE2_SIZE outlen = MATCH_TARGET_MAX;
		int rc;

		if (m->rw_regex >= s->n || !s->code[m->rw_regex] || !mw.md)
			return rewrite_fail(t, WEIR_ERR(REWRITE_FAILED), "has no compiled regex");
		if (s->nseg && s->nseg[m->rw_regex]) {
			rc = rewrite_cut(s, m->rw_regex, route_mstring(t->table, m->rw_replace_off), a, n, b, &outlen);
			goto done;
		}
		/* a group that took no part in the match is empty, not an error */
		rc = pcre2_substitute(s->code[m->rw_regex], (PCRE2_SPTR)a, n, 0, PCRE2_SUBSTITUTE_UNSET_EMPTY, mw.md,
		                      mw.mctx, (PCRE2_SPTR)route_mstring(t->table, m->rw_replace_off),
		                      m->rw_replace_len, (PCRE2_UCHAR *)b, &outlen);
	done:
		if (rc == PCRE2_ERROR_NOMEMORY)
			return rewrite_fail(t, WEIR_ERR(REWRITE_TOO_LONG), "passes 4 KiB");
		if (rc < 0) {
			if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT)
				worker_count_error(WEIR_ERR(REGEX_LIMIT));
			return rewrite_fail(t, WEIR_ERR(REWRITE_FAILED), "failed in PCRE2");
		}
		if (rc > 0) { /* no match: the path goes as it is */
			char *x = a;

			a = b;
			b = x;
			n = outlen;
		}
	}
	if (!path_ok(a, n))
		return rewrite_fail(t, WEIR_ERR(REWRITE_FAILED), "gives no origin-form path");
	if (n + qlen > MATCH_TARGET_MAX)
		return rewrite_fail(t, WEIR_ERR(REWRITE_TOO_LONG), "passes 4 KiB");
	memcpy(a + n, q, qlen); /* the query, as sent */
	*out = a;
	*len = (uint32_t)(n + qlen);
	return 0;
}
