/*
 * tls.c: contexts, handshakes, SNI, ALPN and session tickets (see tls.h).
 */
#include "worker/net/net.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/ec_key.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/mem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common/log.h"
#include "common/tlscert.h"
#include "shm/ticket.h"
#include "worker/base/base.h"

#define TLS_LOG_PER_SEC 10

/* One TLS listener: a context per certificate ([0] is the default, which
 * receives every ClientHello), and the names and key types that select the
 * others (tls_pick.h). */
struct tls_listener {
	SSL_CTX *ctx[CONFIG_MAX_CERTS];
	int nctx;
	struct tls_name *names; /* point into the config's tlscert names */
	int nnames;
	uint8_t key[CONFIG_MAX_CERTS]; /* TLS_PICK_KEY_* of each certificate */
	uint64_t siblings;             /* those with exactly ctx[0]'s names */
	const char *client_header; /* the config's client_header, NULL for none */
	size_t client_header_len;
};

/* The longest subject passed upstream; a longer one is cut (a DN that long
 * is either an attack or a mistake, and origins cap header lines anyway). */
#define TLS_SUBJECT_MAX 1024

/* This worker's copy of the ticket keys, on a page of its own that is
 * kept out of core dumps and wiped at exit. */
struct tls_keys {
	uint64_t seq;
	int n;
	struct ticket_key key[2];
};

static struct {
	struct tls_listener *l[CONFIG_MAX_LISTENERS];
	struct tls_keys *keys; /* mmap'd page, NULL without TLS listeners */
	/* SSL ex_data: the connection's struct tls_listener, and the verified
	 * client subject (malloc'd, freed with the SSL) */
	int ex_listener;
	int ex_subject;
	/* failure lines in the current second, and those left out */
	time_t log_sec;
	uint32_t log_lines;
	uint32_t log_suppressed;
} tls;

/* ---- session tickets --------------------------------------------------- */

/* The keys for this handshake: copied again only when the master rotated. */
static int tls_keys_current(void)
{
	struct tls_keys *k = tls.keys;

	if (ticket_keys_seq(&wk.seg->ticket) != k->seq) {
		int n = ticket_keys_copy(&wk.seg->ticket, k->key, &k->seq);
		if (n >= 0)
			k->n = n; /* -1: a rotation is under way; the old copy serves */
	}
	return k->n;
}

/*
 * Seals and opens tickets as nginx does: AES-128-CBC with an HMAC-SHA256,
 * under a 16-byte key name. Opening with the previous key answers 2, which
 * makes BoringSSL issue a new ticket under the current one.
 */
static int tls_ticket_cb(SSL *ssl, uint8_t *name, uint8_t *iv, EVP_CIPHER_CTX *ectx, HMAC_CTX *hctx, int encrypt)
{
	int n = tls_keys_current();
	const struct ticket_key *k;
	(void)ssl;

	if (encrypt) {
		if (n == 0)
			return -1; /* cannot happen: the master makes a key before any worker starts */
		k = &tls.keys->key[0];
		if (!RAND_bytes(iv, EVP_CIPHER_iv_length(EVP_aes_128_cbc())))
			return -1;
		memcpy(name, k->name, sizeof(k->name));
		if (!EVP_EncryptInit_ex(ectx, EVP_aes_128_cbc(), NULL, k->aes, iv) ||
		    !HMAC_Init_ex(hctx, k->hmac, sizeof(k->hmac), EVP_sha256(), NULL))
			return -1;
		SHM_ADD(wk.cnt, tls_tickets, 1);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		k = &tls.keys->key[i];
		if (memcmp(name, k->name, sizeof(k->name)) != 0)
			continue;
		if (!HMAC_Init_ex(hctx, k->hmac, sizeof(k->hmac), EVP_sha256(), NULL) ||
		    !EVP_DecryptInit_ex(ectx, EVP_aes_128_cbc(), NULL, k->aes, iv))
			return -1;
		return i == 0 ? 1 : 2;
	}
	return 0; /* unknown or expired key: a full handshake */
}

/* ---- SNI and ALPN ------------------------------------------------------ */

/*
 * Chooses the certificate by SNI name and by the key types the client can
 * verify (tls_pick.h), from BoringSSL's early callback: the servername
 * callback sees only the name, not the signature algorithms and suites
 * an ECDSA/RSA pair is chosen by. It runs before the resumption decision,
 * so a session is resumed only under the context (session id context)
 * chosen here. Nothing is allocated here but SSL_set_SSL_CTX's copy.
 */
void tls_hello_raw(const SSL_CLIENT_HELLO *ch, struct tls_pick_raw *raw)
{
	*raw = (struct tls_pick_raw){.suites = ch->cipher_suites, .suites_len = ch->cipher_suites_len};
	if (!SSL_early_callback_ctx_extension_get(ch, TLSEXT_TYPE_server_name, &raw->sni, &raw->sni_len))
		raw->sni = NULL;
	if (!SSL_early_callback_ctx_extension_get(ch, TLSEXT_TYPE_signature_algorithms, &raw->sigalgs,
	                                          &raw->sigalgs_len))
		raw->sigalgs = NULL;
	if (!SSL_early_callback_ctx_extension_get(ch, TLSEXT_TYPE_supported_versions, &raw->versions,
	                                          &raw->versions_len))
		raw->versions = NULL;
}

static enum ssl_select_cert_result_t tls_select_cert_cb(const SSL_CLIENT_HELLO *ch)
{
	const struct tls_listener *l = SSL_get_ex_data(ch->ssl, tls.ex_listener);
	struct tls_pick_raw raw;
	struct tls_pick_hello h;
	int k;

	if (!l || l->nctx < 2)
		return ssl_select_cert_success;
	tls_hello_raw(ch, &raw);
	/* a malformed extension: BoringSSL refuses the hello itself, with
	 * the right alert; nothing to choose */
	if (tls_pick_parse_hello(&raw, &h) < 0)
		return ssl_select_cert_success;
	k = tls_pick_choose_cert(l->names, l->nnames, l->key, l->nctx, l->siblings, &h);
	if (k > 0 && !SSL_set_SSL_CTX(ch->ssl, l->ctx[k]))
		return ssl_select_cert_error;
	return ssl_select_cert_success;
}

/* The choice was made in tls_select_cert_cb; this callback is kept because
 * without one BoringSSL does not acknowledge the client's server_name
 * (RFC 6066 3: the server that used it says so). */
static int tls_servername_cb(SSL *ssl, int *alert, void *arg)
{
	(void)ssl;
	(void)alert;
	(void)arg;
	return SSL_TLSEXT_ERR_OK;
}

/* ALPN: the first protocol of the listener's tls.alpn (the server's order
 * of preference, "h2,http/1.1" by default) that the client offers. A
 * client offering none of them gets no ALPN answer and may go on with
 * HTTP/1.1 or leave: its choice, as with nginx. */
static int tls_alpn_cb(SSL *ssl, const uint8_t **out, uint8_t *outlen, const uint8_t *in, unsigned inlen,
                       void *arg)
{
	const struct config_listener *lc = arg;
	const char *p = lc->alpn[0] ? lc->alpn : "http/1.1";
	(void)ssl;

	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		for (unsigned i = 0; i < inlen;) {
			unsigned l = in[i];
			if (i + 1 + l > inlen)
				break;
			if (l == n && memcmp(in + i + 1, p, n) == 0) {
				*out = in + i + 1;
				*outlen = (uint8_t)l;
				return SSL_TLSEXT_ERR_OK;
			}
			i += 1 + l;
		}
		p += n + (e != NULL);
	}
	return SSL_TLSEXT_ERR_NOACK;
}

/* ---- contexts ------------------------------------------------------------ */

/*
 * Asks for client certificates on <ctx> and verifies them against the
 * listener's client_ca alone (the context's own store, not the system's).
 * Every context of the listener gets the same, because an SNI switch
 * (SSL_set_SSL_CTX) moves the handshake to another context's store.
 * Returns 0 or -1.
 */
static int tls_ctx_client_ca(SSL_CTX *ctx, const struct config_listener *lc)
{
	X509_STORE *st = SSL_CTX_get_cert_store(ctx);
	int mode = SSL_VERIFY_PEER;

	for (size_t i = 0; i < sk_X509_num(lc->client_cas->certs); i++) {
		X509 *x = sk_X509_value(lc->client_cas->certs, i);
		/* the CA names also go in the CertificateRequest, so a client
		 * with several certificates picks the right one */
		if (!X509_STORE_add_cert(st, x) || !SSL_CTX_add_client_CA(ctx, x))
			return -1;
	}
	if (lc->client_verify == CONFIG_CLIENT_VERIFY_REQUIRED)
		mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
	/* no callback: a certificate that does not verify fails the
	 * handshake even with "optional", which only allows none at all */
	SSL_CTX_set_verify(ctx, mode, NULL);
	return 0;
}

/* The context for certificate <c> of listener <lc>. */
SSL_CTX *tls_ctx_base(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_method());

	if (!ctx)
		return NULL;
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) || !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION)) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	return ctx;
}

static SSL_CTX *tls_ctx_new(const struct config_listener *lc, const struct config_cert *c)
{
	const struct tlscert *tc = c->loaded;
	SSL_CTX *ctx = tls_ctx_base();
	uint8_t sid[SHA256_DIGEST_LENGTH];
	SHA256_CTX sh;

	if (!ctx)
		return NULL;
	/* sessions are bound to the listener address and the certificate
	 * file: a ticket for one name is never resumed under another
	 * certificate, and stays valid across reloads and workers */
	SHA256_Init(&sh);
	SHA256_Update(&sh, lc->addr.text, strlen(lc->addr.text) + 1);
	SHA256_Update(&sh, c->cert, strlen(c->cert));
	/* and to the client certificate policy: a session made without a
	 * client certificate must not resume where one is now required */
	SHA256_Update(&sh, lc->client_ca, strlen(lc->client_ca) + 1);
	SHA256_Update(&sh, &lc->client_verify, sizeof(lc->client_verify));
	SHA256_Final(sid, &sh);
	if (!SSL_CTX_use_certificate(ctx, tc->leaf) || !SSL_CTX_set1_chain(ctx, tc->chain) ||
	    !SSL_CTX_use_PrivateKey(ctx, tc->key) || !SSL_CTX_check_private_key(ctx) ||
	    !SSL_CTX_set_session_id_context(ctx, sid, SSL_MAX_SID_CTX_LENGTH))
		goto fail;
	/* TLS 1.2 with forward secrecy and AEAD only (Mozilla's "intermediate"
	 * profile): BoringSSL's default list still has the CBC-SHA suites,
	 * which scanners rightly flag (LUCKY13); TLS 1.3 suites are fixed */
	if (!SSL_CTX_set_strict_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
	                                         "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
	                                         "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"))
		goto fail;
	/* no per-process session cache: a worker's cache would only help the
	 * clients that land on it again; tickets work on every worker */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_tlsext_ticket_key_cb(ctx, tls_ticket_cb);
	/*
	 * BoringSSL sends two tickets after every TLS 1.3 handshake, resumed
	 * or not, so that a client opening several connections at once has
	 * one for each. Each costs both sides a key derivation, a ticket
	 * sealed and a record, and a client that resumes again and again
	 * (the common case behind a keep-alive pool or a load tool) uses one
	 * of the two and gets two more each time: with one, a resumed
	 * handshake costs weir some 6% less CPU and the client 8% less
	 * (cpusplit --tls --close). OpenSSL too sends one after a resumption.
	 */
	if (lc->session_tickets > 0)
		SSL_CTX_set_num_tickets(ctx, (size_t)lc->session_tickets);
	else
		SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	SSL_CTX_set_alpn_select_cb(ctx, tls_alpn_cb, (void *)lc);
	/* 0-RTT: replayable by anyone who saw the packets, so conn.c serves
	 * only safe, bodiless requests from it (RFC 8470) */
	SSL_CTX_set_early_data_enabled(ctx, lc->early_data);
	if ((tc->ocsp && !SSL_CTX_set_ocsp_response(ctx, tc->ocsp, tc->ocsp_len)) ||
	    (lc->client_cas && tls_ctx_client_ca(ctx, lc) < 0))
		goto fail;
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

/* TLS_PICK_KEY_* of <key>: the curve matters, TLS 1.3 binds it to the
 * signature scheme. */
static int tls_key_type(const EVP_PKEY *key)
{
	const EC_KEY *ec = EVP_PKEY_id(key) == EVP_PKEY_EC ? EVP_PKEY_get0_EC_KEY(key) : NULL;
	const EC_GROUP *g = ec ? EC_KEY_get0_group(ec) : NULL;

	return tls_pick_key_type(EVP_PKEY_id(key), g ? EC_GROUP_get_curve_name(g) : NID_undef);
}

static void tls_listener_free(struct tls_listener *l)
{
	if (!l)
		return;
	for (int i = 0; i < l->nctx; i++)
		SSL_CTX_free(l->ctx[i]);
	free(l->names);
	free(l);
}

static void tls_subject_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int index, long argl, void *argp)
{
	(void)parent;
	(void)ad;
	(void)index;
	(void)argl;
	(void)argp;
	free(ptr);
}

int tls_init(const struct config *cfg)
{
	int any = 0;

	for (int i = 0; i < cfg->nlisteners; i++) {
		const struct config_listener *lc = &cfg->listeners[i];
		struct tls_listener *l;
		int nn = 0;

		if (!lc->tls)
			continue;
		any = 1;
		for (int k = 0; k < lc->ncerts; k++)
			nn += cfg->certs[lc->first_cert + k].loaded->nnames;
		l = calloc(1, sizeof(*l));
		if (!l || !(l->names = calloc((size_t)(nn ? nn : 1), sizeof(*l->names)))) {
			free(l);
			log_error("TLS on %s: out of memory", lc->addr.text);
			return -1;
		}
		tls.l[i] = l;
		if (lc->client_cas && lc->client_header[0]) {
			l->client_header = lc->client_header;
			l->client_header_len = strlen(lc->client_header);
		}
		for (int k = 0; k < lc->ncerts; k++) {
			const struct config_cert *c = &cfg->certs[lc->first_cert + k];

			l->ctx[k] = tls_ctx_new(lc, c);
			if (!l->ctx[k]) {
				log_error("TLS on %s: certificate %s: %s", lc->addr.text, c->cert, tlscert_reason("unknown error"));
				return -1;
			}
			l->nctx++;
			l->key[k] = (uint8_t)tls_key_type(c->loaded->key);
			for (int j = 0; j < c->loaded->nnames; j++)
				l->names[l->nnames++] = (struct tls_name){
					.name = c->loaded->names[j], .len = strlen(c->loaded->names[j]), .cert = k};
		}
		l->siblings = tls_pick_find_siblings(l->names, l->nnames, l->nctx);
		/* ctx[0] receives every ClientHello: its callback is the one
		 * that runs, whatever context it switches to */
		SSL_CTX_set_select_certificate_cb(l->ctx[0], tls_select_cert_cb);
		SSL_CTX_set_tlsext_servername_callback(l->ctx[0], tls_servername_cb);
	}
	if (!any)
		return 0;
	tls.ex_listener = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	tls.ex_subject = SSL_get_ex_new_index(0, NULL, NULL, NULL, tls_subject_free);
	if (tls.ex_listener < 0 || tls.ex_subject < 0) {
		log_error("TLS: out of memory");
		return -1;
	}
	tls.keys = mmap(NULL, TICKET_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (tls.keys == MAP_FAILED) {
		tls.keys = NULL;
		log_error("TLS: cannot map the ticket key page: %s", strerror(errno));
		return -1;
	}
	madvise(tls.keys, TICKET_PAGE, MADV_DONTDUMP);
	tls_keys_current();
	return 0;
}

void tls_cleanup(void)
{
	for (int i = 0; i < CONFIG_MAX_LISTENERS; i++) {
		tls_listener_free(tls.l[i]);
		tls.l[i] = NULL;
	}
	if (tls.keys) {
		OPENSSL_cleanse(tls.keys, sizeof(*tls.keys));
		munmap(tls.keys, TICKET_PAGE);
		tls.keys = NULL;
	}
}

int tls_listener(int l)
{
	return l >= 0 && l < CONFIG_MAX_LISTENERS && tls.l[l] != NULL;
}

SSL *tls_new(int l, int fd)
{
	SSL *ssl = SSL_new(tls.l[l]->ctx[0]);

	if (!ssl)
		return NULL;
	if (tls_bio_attach(ssl, fd) < 0 || !SSL_set_ex_data(ssl, tls.ex_listener, tls.l[l])) {
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_accept_state(ssl);
	return ssl;
}

/* ---- handshakes ---------------------------------------------------------- */

int tls_got_bytes(const struct conn *c)
{
	return c->ssl && BIO_number_read(SSL_get_rbio(c->ssl)) > 0;
}

/*
 * Keeps the subject of <ssl>'s verified client certificate, one line in
 * RFC 2253 form ("CN=alice,O=Example"), for tls_client_header(). Nothing is
 * kept without a certificate. The printer escapes controls and bytes past
 * 0x7f, so the line is safe in a header; anything else below 0x20 is
 * replaced all the same, because the origin trusts this header. Returns 0,
 * or -1 when out of memory.
 */
static int tls_keep_subject(SSL *ssl)
{
	X509 *peer = SSL_get_peer_certificate(ssl);
	BIO *b;
	const uint8_t *data;
	size_t len;
	char *s;

	if (!peer)
		return 0;
	if (SSL_get_verify_result(ssl) != X509_V_OK) {
		/* cannot happen: SSL_VERIFY_PEER without a callback fails
		 * the handshake first; never pass an unverified name on */
		X509_free(peer);
		return 0;
	}
	b = BIO_new(BIO_s_mem());
	if (!b || X509_NAME_print_ex(b, X509_get_subject_name(peer), 0, XN_FLAG_RFC2253) < 0 ||
	    !BIO_mem_contents(b, &data, &len)) {
		BIO_free(b);
		X509_free(peer);
		return -1;
	}
	if (len > TLS_SUBJECT_MAX)
		len = TLS_SUBJECT_MAX;
	s = malloc(len + 1);
	if (s) {
		for (size_t i = 0; i < len; i++)
			s[i] = (data[i] < 0x20 || data[i] == 0x7f) ? '?' : (char)data[i];
		s[len] = '\0';
	}
	BIO_free(b);
	X509_free(peer);
	if (!s || !SSL_set_ex_data(ssl, tls.ex_subject, s)) {
		free(s);
		return -1;
	}
	return 0;
}

const char *tls_client_header(const struct conn *c, size_t *len, const char **subj, size_t *subj_len)
{
	const struct tls_listener *l;

	if (c->h2s) /* an HTTP/2 stream: its session's connection has the SSL */
		c = h2_conn_parent(c);
	if (!c->ssl)
		return NULL;
	l = SSL_get_ex_data(c->ssl, tls.ex_listener);
	if (!l || !l->client_header)
		return NULL;
	*len = l->client_header_len;
	*subj = SSL_get_ex_data(c->ssl, tls.ex_subject);
	*subj_len = *subj ? strlen(*subj) : 0;
	return l->client_header;
}

/* The failure class of the error on top of BoringSSL's queue. */
static int tls_fail_reason(void)
{
	switch (ERR_GET_REASON(ERR_peek_last_error())) {
	case SSL_R_HTTP_REQUEST:
		return TLS_FAIL_PLAIN_HTTP;
	case SSL_R_NO_SHARED_CIPHER:
	case SSL_R_NO_SHARED_GROUP:
	case SSL_R_UNSUPPORTED_PROTOCOL:
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_UNKNOWN_PROTOCOL:
	case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
		return TLS_FAIL_PROTOCOL;
	case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
	case SSL_R_CERTIFICATE_VERIFY_FAILED:
		return TLS_FAIL_CLIENT_CERT;
	default:
		return TLS_FAIL_OTHER;
	}
}

int tls_handshake(struct conn *c, int *events, const char **why, int *reason)
{
	int rc, err;

	*reason = TLS_FAIL_OTHER;
	errno = 0;
	rc = SSL_do_handshake(c->ssl);
	if (rc == 1) {
		const struct tls_listener *l = SSL_get_ex_data(c->ssl, tls.ex_listener);
		if (l->client_header && tls_keep_subject(c->ssl) < 0) {
			*why = "out of memory for the client certificate subject";
			return WEIR_ERR(TLS_HANDSHAKE);
		}
		SHM_ADD(wk.cnt, tls_handshakes, 1);
		if (SSL_session_reused(c->ssl))
			SHM_ADD(wk.cnt, tls_resumed, 1);
		return 0;
	}
	err = SSL_get_error(c->ssl, rc);
	*events = tls_want_events(err);
	if (*events)
		return WEIR_EAGAIN;
	switch (err) {
	case SSL_ERROR_SSL:
		*reason = tls_fail_reason();
		*why = tlscert_reason("unknown error");
		break;
	case SSL_ERROR_SYSCALL:
	case SSL_ERROR_ZERO_RETURN:
		*reason = TLS_FAIL_CLOSED;
		if (errno && errno != EPIPE && errno != ECONNRESET)
			*why = strerror(errno);
		else
			*why = tls_got_bytes(c) ? "the client closed the connection" : NULL;
		break;
	default:
		*why = "unexpected SSL_get_error";
		break;
	}
	ERR_clear_error();
	return WEIR_ERR(TLS_HANDSHAKE);
}

/* A new second: says how many failures the last one left unlogged, and
 * opens the new one's budget. */
static void tls_log_second(time_t now)
{
	if (now == tls.log_sec)
		return;
	if (tls.log_suppressed)
		log_info("%u more TLS handshake failure(s) not logged", tls.log_suppressed);
	tls.log_sec = now;
	tls.log_lines = 0;
	tls.log_suppressed = 0;
}

void tls_handshake_failed(struct conn *c, int reason, const char *why)
{
	time_t now = (time_t)ev_now(wk.loop);

	worker_count_error(WEIR_ERR(TLS_HANDSHAKE));
	SHM_ADD(wk.cnt, tls_failures[reason], 1);
	if (log_level_min > LOG_LEVEL_INFO)
		return;
	tls_log_second(now);
	if (tls.log_lines >= TLS_LOG_PER_SEC) {
		tls.log_suppressed++;
		return;
	}
	tls.log_lines++;
	log_info("%s: TLS handshake failed: %s", c->peer, why);
}

int tls_in_early_data(const struct conn *c)
{
	if (c->h2s)
		c = h2_conn_parent(c);
	return c->ssl && SSL_in_early_data(c->ssl);
}

void tls_close(struct conn *c)
{
	if (!c->ssl)
		return;
	tls_ssl_close(c->ssl);
	c->ssl = NULL;
	c->tls_read_wants = c->tls_write_wants = 0;
}

void tls_tick(void)
{
	time_t now = (time_t)ev_now(wk.loop);

	if (tls.log_suppressed)
		tls_log_second(now);
	/* without a master this process is the one that rotates */
	if (tls.keys && !wk.cfg->master_process &&
	    ticket_keys_maybe_rotate(&wk.seg->ticket, wk.cfg->tls_ticket_rotate, (uint64_t)time(NULL)) < 0)
		log_error("cannot make a new session ticket key (RAND_bytes failed)");
}
