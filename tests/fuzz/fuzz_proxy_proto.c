/*
 * fuzz_proxy_proto.c: the PROXY protocol header parser (worker/net/proxy_proto.c)
 * on the first bytes of a connection.
 *
 * What it promises, checked here: one of done, need more or refused; a
 * header's length within the input and its version's bound; "need more"
 * only for a prefix of something it would accept, so every shorter input
 * asks for more, a refusal stays a refusal whatever follows, and the bytes
 * after a header change nothing; a reason for every refusal. A v1 TCP4
 * header has one spelling, so it is printed back from the result and must
 * be the input.
 */
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include "common/err.h"
#include "tests/fuzz/fuzz.h"
#include "worker/net/net.h"

#define REFUSED WEIR_ERR(PROXY_PROTOCOL)

static uint8_t copy[PROXY_PROTO_MAX + 2];

static void check_same(const struct proxy_proto *a, const struct proxy_proto *b)
{
	FUZZ_CHECK(a->len == b->len && a->version == b->version && a->local == b->local);
	if (!a->local) {
		FUZZ_CHECK(a->family == b->family && a->sport == b->sport && a->dport == b->dport);
		FUZZ_CHECK(memcmp(a->src, b->src, 16) == 0 && memcmp(a->dst, b->dst, 16) == 0);
	}
}

static void check_v1_tcp4_spelling(const uint8_t *data, const struct proxy_proto *pp)
{
	char line[PROXY_PROTO_V1_MAX + 1], s[INET_ADDRSTRLEN], d[INET_ADDRSTRLEN];
	int n;

	FUZZ_CHECK(inet_ntop(AF_INET, pp->src, s, sizeof(s)) && inet_ntop(AF_INET, pp->dst, d, sizeof(d)));
	n = snprintf(line, sizeof(line), "PROXY TCP4 %s %s %u %u\r\n", s, d, pp->sport, pp->dport);
	FUZZ_CHECK(n > 0 && (uint32_t)n == pp->len && memcmp(line, data, pp->len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proxy_proto pp, again, at_cut;
	size_t cut = fuzz_split(data, size);
	int rc = proxy_proto_parse(data, size, &pp), rc_cut;

	FUZZ_CHECK(rc == 0 || rc == WEIR_EAGAIN || rc == REFUSED);
	rc_cut = proxy_proto_parse(data, cut, &at_cut);
	if (rc == REFUSED) {
		FUZZ_CHECK(pp.why != NULL);
		/* refused with more bytes: refused with one more too */
		if (size <= PROXY_PROTO_MAX) {
			memcpy(copy, data, size);
			copy[size] = 'x';
			FUZZ_CHECK(proxy_proto_parse(copy, size + 1, &again) == REFUSED);
		}
		return 0;
	}
	/* a prefix of what is not refused is not refused */
	FUZZ_CHECK(rc_cut != REFUSED);
	if (rc == WEIR_EAGAIN) {
		FUZZ_CHECK(size < PROXY_PROTO_MAX);
		FUZZ_CHECK(rc_cut == WEIR_EAGAIN);
		return 0;
	}
	FUZZ_CHECK(pp.len > 0 && pp.len <= size);
	FUZZ_CHECK(pp.version == 1 ? pp.len <= PROXY_PROTO_V1_MAX : pp.version == 2 && pp.len <= PROXY_PROTO_MAX);
	FUZZ_CHECK(pp.local || pp.family == AF_INET || pp.family == AF_INET6);
	/* the header alone: the same; one byte short: more needed */
	FUZZ_CHECK(proxy_proto_parse(data, pp.len, &again) == 0);
	check_same(&pp, &again);
	FUZZ_CHECK(proxy_proto_parse(data, pp.len - 1, &again) == WEIR_EAGAIN);
	if (cut < pp.len) {
		FUZZ_CHECK(rc_cut == WEIR_EAGAIN);
	} else {
		FUZZ_CHECK(rc_cut == 0);
		check_same(&pp, &at_cut);
	}
	if (pp.version == 1 && !pp.local && pp.family == AF_INET)
		check_v1_tcp4_spelling(data, &pp);
	return 0;
}
