/*
 * tlscert.c: reading a certificate chain and its key, and the names the
 * certificate serves (see tlscert.h).
 *
 * Files are read whole (bounded by TLSCERT_FILE_MAX) with stdio so an
 * unreadable file is reported with its errno, then parsed from memory; the
 * buffer that held the key is wiped before it is freed.
 */
#include "common/tlscert.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/mem.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define TLSCERT_FILE_MAX (1024 * 1024)

/* Reads <path> whole into a malloc'd buffer. Returns it with *len, or NULL
 * with errno (EFBIG past TLSCERT_FILE_MAX). */
static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = malloc(TLSCERT_FILE_MAX + 1);
	if (!buf) {
		fclose(f);
		errno = ENOMEM;
		return NULL;
	}
	n = fread(buf, 1, TLSCERT_FILE_MAX + 1, f);
	if (ferror(f) || n > TLSCERT_FILE_MAX) {
		int saved = ferror(f) ? errno : EFBIG;
		OPENSSL_cleanse(buf, n);
		free(buf);
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
	free(buf);
}

/* The reason of the last BoringSSL error, or <dflt>. Clears the queue. */
static const char *ssl_reason(const char *dflt)
{
	uint32_t e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return r ? r : dflt;
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
	X509 *x;

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
		snprintf(why, cap, "no PEM certificate in it (%s)", ssl_reason("no certificate"));
		goto fail;
	}
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
		if (!sk_X509_push(tc->chain, x)) {
			X509_free(x);
			snprintf(why, cap, "out of memory");
			goto fail;
		}
	}
	/* the loop ends on "no start line" at the end of the file; anything
	 * else is a damaged certificate after the leaf */
	{
		uint32_t e = ERR_peek_last_error();
		if (e && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)) {
			snprintf(why, cap, "a certificate after the first is not valid PEM (%s)", ssl_reason("bad PEM"));
			goto fail;
		}
		ERR_clear_error();
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
		snprintf(why, cap, "the key %s is not a PEM private key (%s)", key_path, ssl_reason("bad PEM"));
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

void tlscert_free(struct tlscert *tc)
{
	if (!tc)
		return;
	X509_free(tc->leaf);
	sk_X509_pop_free(tc->chain, X509_free);
	EVP_PKEY_free(tc->key);
	free(tc);
}
