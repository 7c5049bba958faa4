/*
 * fuzz_tls_pick.c: the ClientHello reader that picks a listener's
 * certificate (worker/net/tls_pick.c, worker/net/tls_names.c).
 *
 * The input is the body of a ClientHello handshake message. The target
 * wraps it in a handshake header and TLS records and hands it to a BoringSSL
 * server, whose select-certificate callback reads the extensions with
 * worker/net/tls.c's tls_hello_raw(), as the worker does, and runs the choice
 * against a fixed listener of six certificates: an ECDSA/RSA pair for the
 * same names, wildcards and a key type weir never prefers. So the bytes tls_pick sees
 * are those BoringSSL lets through, as in the worker, while the fuzzer
 * needs no record or handshake lengths right. The callback then fails the
 * handshake: nothing after the choice is weir's code.
 */
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tests/fuzz/fuzz.h"
#include "worker/net/net.h"

static const struct tls_name names[] = {
	{"example.com", 11, 0},   {"www.example.com", 15, 0}, {"example.com", 11, 1},
	{"www.example.com", 15, 1}, {"*.example.org", 13, 2}, {"*.example.org", 13, 3},
	{"example.org", 11, 3},   {"other.test", 10, 4},      {"*.other.test", 12, 5},
};
static const uint8_t keys[] = {TLS_PICK_KEY_P256, TLS_PICK_KEY_RSA, TLS_PICK_KEY_P384,
                               TLS_PICK_KEY_RSA,  TLS_PICK_KEY_P521, TLS_PICK_KEY_OTHER};
#define NNAMES (int)(sizeof(names) / sizeof(names[0]))
#define NCERTS (int)sizeof(keys)

static SSL_CTX *ctx;
static uint64_t siblings;

static void check_choice(const struct tls_pick_hello *h, const uint8_t *hello, size_t hello_len)
{
	int k = tls_pick_choose_cert(names, NNAMES, keys, NCERTS, siblings, h);

	FUZZ_CHECK(k >= 0 && k < NCERTS);
	if (h->host)
		FUZZ_CHECK(fuzz_within(h->host, h->host_len, hello, hello_len) && h->host_len > 0 &&
		           h->host_len <= 255 && !memchr(h->host, 0, h->host_len));
	/* a key the client can verify is served when a candidate has one:
	 * the pair for example.com without SNI */
	if (!h->host && (tls_pick_key_usable(h, TLS_PICK_KEY_P256) || tls_pick_key_usable(h, TLS_PICK_KEY_RSA)))
		FUZZ_CHECK(tls_pick_key_usable(h, keys[k]));
	/* fewer certificates: every index stays in range */
	for (int n = 1; n <= NCERTS; n++) {
		int j = tls_pick_choose_cert(names, NNAMES, keys, n, tls_pick_find_siblings(names, NNAMES, n), h);

		FUZZ_CHECK(j >= 0 && j < n);
	}
}

/* What worker/net/tls.c's tls_select_cert_cb does with the hello, then stop. */
static enum ssl_select_cert_result_t select_cb(const SSL_CLIENT_HELLO *ch)
{
	struct tls_pick_raw raw;
	struct tls_pick_hello h;

	tls_hello_raw(ch, &raw);
	if (tls_pick_parse_hello(&raw, &h) == 0) {
		check_choice(&h, ch->client_hello, ch->client_hello_len);
		FUZZ_CHECK(!raw.sni == !h.host);
	}
	return ssl_select_cert_error;
}

static void init(void)
{
	ctx = SSL_CTX_new(TLS_method());
	FUZZ_CHECK(ctx);
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_select_certificate_cb(ctx, select_cb);
	siblings = tls_pick_find_siblings(names, NNAMES, NCERTS);
	FUZZ_CHECK(siblings == 0x3);
}

/* handshake header and records around the hello body */
static uint8_t wire[70000];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t msg_len = size + 4, off = 0, w = 0;
	uint8_t msg[65536 + 4];
	SSL *ssl;
	BIO *rb, *wb;

	if (!ctx)
		init();
	if (size > 65536)
		return 0;
	msg[0] = 1; /* client_hello */
	msg[1] = (uint8_t)(size >> 16);
	msg[2] = (uint8_t)(size >> 8);
	msg[3] = (uint8_t)size;
	memcpy(msg + 4, data, size);
	while (off < msg_len) {
		size_t n = msg_len - off > 16384 ? 16384 : msg_len - off;

		wire[w++] = 22; /* handshake */
		wire[w++] = 3;
		wire[w++] = 1;
		wire[w++] = (uint8_t)(n >> 8);
		wire[w++] = (uint8_t)n;
		memcpy(wire + w, msg + off, n);
		w += n;
		off += n;
	}
	ssl = SSL_new(ctx);
	FUZZ_CHECK(ssl);
	rb = BIO_new_mem_buf(wire, (long)w);
	wb = BIO_new(BIO_s_mem());
	FUZZ_CHECK(rb && wb);
	SSL_set_bio(ssl, rb, wb);
	SSL_set_accept_state(ssl);
	SSL_do_handshake(ssl);
	SSL_free(ssl);
	ERR_clear_error();
	return 0;
}
