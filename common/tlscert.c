/*
 * tlscert.c: reading a certificate chain and its key, and the names the
 * certificate serves (see tlscert.h).
 *
 * Files are read whole (bounded by TLSCERT_FILE_MAX) with unbuffered stdio
 * so an unreadable file is reported with its errno, into a mapping kept out
 * of core dumps, then parsed from memory; the buffer is wiped before it is
 * unmapped.
 */
#include "common/tlscert.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <openssl/bio.h>
#include <openssl/bytestring.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/mem.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define TLSCERT_FILE_MAX (1024 * 1024)
/* the read buffer: one byte more than the limit, to see a file past it */
#define TLSCERT_MAP_SIZE (TLSCERT_FILE_MAX + 4096)

/*
 * Reads <path> whole into an anonymous mapping kept out of core dumps
 * (MADV_DONTDUMP), so a key's PEM text never reaches one even if the
 * process dies while parsing it. Returns it with *len, or NULL with errno
 * (EFBIG past TLSCERT_FILE_MAX). Release with wipe_free().
 */
static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	/* unbuffered: the bytes go straight into <buf>, leaving no copy in a
	 * stdio buffer that fclose() would free unwiped */
	setvbuf(f, NULL, _IONBF, 0);
	buf = mmap(NULL, TLSCERT_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		fclose(f);
		errno = ENOMEM;
		return NULL;
	}
	/* best effort: a kernel without it (before 3.4) still gets the wipe */
	(void)madvise(buf, TLSCERT_MAP_SIZE, MADV_DONTDUMP);
	n = fread(buf, 1, TLSCERT_FILE_MAX + 1, f);
	if (ferror(f) || n > TLSCERT_FILE_MAX) {
		int saved = ferror(f) ? errno : EFBIG;
		OPENSSL_cleanse(buf, n);
		munmap(buf, TLSCERT_MAP_SIZE);
		fclose(f);
		errno = saved ? saved : EIO;
		return NULL;
	}
	fclose(f);
	*len = n;
	return buf;
}

static void wipe_free(char *buf, size_t len)
{
	if (!buf)
		return;
	OPENSSL_cleanse(buf, len);
	munmap(buf, TLSCERT_MAP_SIZE);
}

const char *tlscert_reason(const char *dflt)
{
	uint32_t e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return r ? r : dflt;
}

/* Appends every PEM certificate left in <bio> to <sk>. Returns 0 at the
 * end of the file, -1 out of memory, -2 when a certificate is damaged
 * (its error left queued for tlscert_reason). */
static int read_certs(BIO *bio, STACK_OF(X509) *sk)
{
	X509 *x;
	uint32_t e;

	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
		if (!sk_X509_push(sk, x)) {
			X509_free(x);
			return -1;
		}
	}
	/* the loop ends on "no start line" at the end of the file; anything
	 * else is a damaged certificate */
	e = ERR_peek_last_error();
	if (e && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE))
		return -2;
	ERR_clear_error();
	return 0;
}

/* Adds DNS name <s> (<len> bytes) to <tc> in lower case, if it is a
 * plausible host name or wildcard; others (IP text, NULs) are skipped. */
static void add_name(struct tlscert *tc, const unsigned char *s, size_t len)
{
	char *out;

	if (tc->nnames == TLSCERT_MAX_NAMES || len == 0 || len >= TLSCERT_NAME_MAX)
		return;
	out = tc->names[tc->nnames];
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = s[i];
		if (ch >= 'A' && ch <= 'Z')
			ch = (unsigned char)(ch - 'A' + 'a');
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' ||
		      ch == '_' || (ch == '*' && i == 0)))
			return;
		out[i] = (char)ch;
	}
	out[len] = '\0';
	tc->nnames++;
}

static void collect_names(struct tlscert *tc)
{
	GENERAL_NAMES *sans = X509_get_ext_d2i(tc->leaf, NID_subject_alt_name, NULL, NULL);
	X509_NAME *subj;
	int i;

	if (sans) {
		for (size_t k = 0; k < sk_GENERAL_NAME_num(sans); k++) {
			const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, k);
			if (g->type == GEN_DNS)
				add_name(tc, ASN1_STRING_get0_data(g->d.dNSName),
				         (size_t)ASN1_STRING_length(g->d.dNSName));
		}
		GENERAL_NAMES_free(sans);
	}
	if (tc->nnames)
		return;
	/* no DNS subjectAltName: the subject's (last) CN, as clients did once */
	subj = X509_get_subject_name(tc->leaf);
	i = X509_NAME_get_index_by_NID(subj, NID_commonName, -1);
	for (int next = i; next >= 0; next = X509_NAME_get_index_by_NID(subj, NID_commonName, next))
		i = next;
	if (i >= 0) {
		ASN1_STRING *cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subj, i));
		add_name(tc, ASN1_STRING_get0_data(cn), (size_t)ASN1_STRING_length(cn));
	}
	ERR_clear_error();
}

struct tlscert *tlscert_load(const char *cert_path, const char *key_path, char *why, size_t cap)
{
	struct tlscert *tc = calloc(1, sizeof(*tc));
	char *pem = NULL;
	size_t len = 0;
	BIO *bio = NULL;
	int rc;

	if (!tc) {
		snprintf(why, cap, "out of memory");
		return NULL;
	}
	ERR_clear_error();
	pem = read_file(cert_path, &len);
	if (!pem) {
		snprintf(why, cap, "cannot read it: %s", strerror(errno));
		goto fail;
	}
	bio = BIO_new_mem_buf(pem, (ssize_t)len);
	tc->chain = sk_X509_new_null();
	if (!bio || !tc->chain) {
		snprintf(why, cap, "out of memory");
		goto fail;
	}
	tc->leaf = PEM_read_bio_X509(bio, NULL, NULL, NULL);
	if (!tc->leaf) {
		snprintf(why, cap, "no PEM certificate in it (%s)", tlscert_reason("no certificate"));
		goto fail;
	}
	rc = read_certs(bio, tc->chain);
	if (rc < 0) {
		if (rc == -1)
			snprintf(why, cap, "out of memory");
		else
			snprintf(why, cap, "a certificate after the first is not valid PEM (%s)", tlscert_reason("bad PEM"));
		goto fail;
	}
	BIO_free(bio);
	bio = NULL;
	wipe_free(pem, len);
	pem = NULL;

	pem = read_file(key_path, &len);
	if (!pem) {
		snprintf(why, cap, "cannot read the key %s: %s", key_path, strerror(errno));
		goto fail;
	}
	bio = BIO_new_mem_buf(pem, (ssize_t)len);
	if (!bio) {
		snprintf(why, cap, "out of memory");
		goto fail;
	}
	tc->key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
	if (!tc->key) {
		snprintf(why, cap, "the key %s is not a PEM private key (%s)", key_path, tlscert_reason("bad PEM"));
		goto fail;
	}
	if (!X509_check_private_key(tc->leaf, tc->key)) {
		ERR_clear_error();
		snprintf(why, cap, "the key %s does not match it", key_path);
		goto fail;
	}
	BIO_free(bio);
	wipe_free(pem, len);
	collect_names(tc);
	return tc;
fail:
	BIO_free(bio);
	wipe_free(pem, len);
	tlscert_free(tc);
	ERR_clear_error();
	return NULL;
}

/*
 * OCSPResponse ::= SEQUENCE { responseStatus ENUMERATED,
 *                             responseBytes [0] EXPLICIT ResponseBytes OPTIONAL }
 * (RFC 6960 4.2.1). Only the outer shape and the status are checked: a
 * "tryLater" or "unauthorized" answer saved by mistake is refused here
 * rather than stapled to every handshake.
 */
int tlscert_load_ocsp(struct tlscert *tc, const char *path, char *why, size_t cap)
{
	size_t len = 0;
	char *der = read_file(path, &len);
	CBS cbs, resp, status;

	if (!der) {
		snprintf(why, cap, "cannot read it: %s", strerror(errno));
		return -1;
	}
	CBS_init(&cbs, (const uint8_t *)der, len);
	if (!CBS_get_asn1(&cbs, &resp, CBS_ASN1_SEQUENCE) || CBS_len(&cbs) != 0 ||
	    !CBS_get_asn1(&resp, &status, CBS_ASN1_ENUMERATED) || CBS_len(&status) != 1) {
		snprintf(why, cap, "not a DER OCSP response (openssl ocsp -respout writes one)");
		goto fail;
	}
	if (CBS_data(&status)[0] != 0) {
		snprintf(why, cap, "its status is %u, not 0 (successful): nothing to staple", CBS_data(&status)[0]);
		goto fail;
	}
	if (!CBS_peek_asn1_tag(&resp, CBS_ASN1_CONTEXT_SPECIFIC | CBS_ASN1_CONSTRUCTED | 0)) {
		snprintf(why, cap, "a successful OCSP response without responseBytes");
		goto fail;
	}
	free(tc->ocsp);
	tc->ocsp = malloc(len);
	if (!tc->ocsp) {
		tc->ocsp_len = 0;
		snprintf(why, cap, "out of memory");
		goto fail;
	}
	memcpy(tc->ocsp, der, len);
	tc->ocsp_len = len;
	wipe_free(der, len);
	return 0;
fail:
	wipe_free(der, len);
	return -1;
}

struct tlsca *tlsca_load(const char *path, char *why, size_t cap)
{
	struct tlsca *ca = calloc(1, sizeof(*ca));
	size_t len = 0;
	char *pem = NULL;
	BIO *bio = NULL;
	int rc;

	if (!ca) {
		snprintf(why, cap, "out of memory");
		return NULL;
	}
	ERR_clear_error();
	pem = read_file(path, &len);
	if (!pem) {
		snprintf(why, cap, "cannot read it: %s", strerror(errno));
		goto fail;
	}
	bio = BIO_new_mem_buf(pem, (ssize_t)len);
	ca->certs = sk_X509_new_null();
	if (!bio || !ca->certs) {
		snprintf(why, cap, "out of memory");
		goto fail;
	}
	rc = read_certs(bio, ca->certs);
	if (rc < 0) {
		if (rc == -1)
			snprintf(why, cap, "out of memory");
		else
			snprintf(why, cap, "a certificate in it is not valid PEM (%s)", tlscert_reason("bad PEM"));
		goto fail;
	}
	if (sk_X509_num(ca->certs) == 0) {
		snprintf(why, cap, "no PEM certificate in it");
		goto fail;
	}
	BIO_free(bio);
	wipe_free(pem, len);
	return ca;
fail:
	BIO_free(bio);
	wipe_free(pem, len);
	tlsca_free(ca);
	ERR_clear_error();
	return NULL;
}

void tlsca_free(struct tlsca *ca)
{
	if (!ca)
		return;
	sk_X509_pop_free(ca->certs, X509_free);
	free(ca);
}

void tlscert_free(struct tlscert *tc)
{
	if (!tc)
		return;
	free(tc->ocsp);
	X509_free(tc->leaf);
	sk_X509_pop_free(tc->chain, X509_free);
	EVP_PKEY_free(tc->key);
	free(tc);
}
