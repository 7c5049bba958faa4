/*
 * config_doc.c: the key tables of docs/config.md, made from the
 * descriptors (common/config_keys.h). `make docs-keys` writes them into the
 * file; tests/unit/common/test_config_keys.c fails while the file and the
 * descriptors disagree, so a key's name, type, default and range are
 * written once, in common/config_keys.c.
 */
#include "common/config_dump.h"
#include "common/config_keys.h"

#include <inttypes.h>
#include <string.h>

static void doc_type(FILE *out, const struct config_key *k)
{
	switch (k->type) {
	case CONFIG_KEY_DURATION:
		fputs("duration", out);
		break;
	case CONFIG_KEY_DURATION_OFF:
		fputs("duration or `\"off\"`", out);
		break;
	case CONFIG_KEY_SIZE:
		fputs("size", out);
		break;
	case CONFIG_KEY_INT:
		fputs(k->flags & CONFIG_KEY_AUTO ? "`\"auto\"` or integer" : "integer", out);
		break;
	case CONFIG_KEY_BOOL:
		fputs("boolean", out);
		break;
	case CONFIG_KEY_STRING:
		fputs("string", out);
		break;
	case CONFIG_KEY_ENUM:
		for (int i = 0, n = 0; i < k->nnames; i++)
			if (k->names[i]) /* false and true are booleans in a file */
				fprintf(out, strcmp(k->names[i], "true") && strcmp(k->names[i], "false") ? "%s`\"%s\"`" : "%s`%s`",
				        n++ ? ", " : "", k->names[i]);
		break;
	case CONFIG_KEY_ADDR:
		fputs("address", out);
		break;
	case CONFIG_KEY_GROUP:
		fputs("group", out);
		break;
	case CONFIG_KEY_LIST:
		fputs("list of groups", out);
		break;
	case CONFIG_KEY_STRINGS:
		fputs("list of strings", out);
		break;
	}
}

static void doc_default(FILE *out, const struct config_key *k)
{
	int quoted = k->type != CONFIG_KEY_INT && k->type != CONFIG_KEY_BOOL;

	if (k->flags & CONFIG_KEY_REQUIRED)
		fputs("**required**", out);
	else if (k->type == CONFIG_KEY_GROUP || k->type == CONFIG_KEY_LIST || k->type == CONFIG_KEY_STRINGS)
		fputs(k->def ? k->def : "", out);
	else if (!k->def)
		fputs("none", out);
	else if (k->flags & CONFIG_KEY_INHERIT)
		fputs(k->def, out);
	else if (quoted || strcmp(k->def, "auto") == 0)
		fprintf(out, "`\"%s\"`", k->def);
	else
		fprintf(out, "`%s`", k->def);
}

static void doc_range(FILE *out, const struct config_key *k)
{
	switch (k->type) {
	case CONFIG_KEY_INT:
		fprintf(out, "%" PRIu64 "..%" PRIu64, k->min, k->max);
		break;
	case CONFIG_KEY_SIZE:
		if (k->max == UINT64_MAX)
			fprintf(out, "%" PRIu64 "..2^64-1", k->min);
		else
			fprintf(out, "%" PRIu64 "..%" PRIu64, k->min, k->max);
		break;
	case CONFIG_KEY_DURATION:
	case CONFIG_KEY_DURATION_OFF: {
		char a[32], b[32];

		if (k->type == CONFIG_KEY_DURATION_OFF)
			fputs("0 (off), ", out);
		if (k->min <= 1 && (k->max == 0 || k->max == UINT32_MAX))
			fputs("1 ms..49 days", out);
		else
			fprintf(out, "%s..%s", config_dump_duration((uint32_t)(k->min ? k->min : 1), a, sizeof a),
			        k->max && k->max != UINT32_MAX ? config_dump_duration((uint32_t)k->max, b, sizeof b)
			                                       : "49 days");
		break;
	}
	case CONFIG_KEY_STRING:
		/* a checked string's rule is in its doc, tighter than this */
		if (!k->check && !k->store)
			fprintf(out, "at most %" PRIu64 " bytes", k->max ? k->max : 255);
		break;
	default:
		break;
	}
}

void config_keys_doc_header(FILE *out)
{
	fputs("| key | type | default | range | meaning |\n|---|---|---|---|---|\n", out);
}

void config_keys_doc_rows(FILE *out, const struct config_keyset *ks, const char *prefix)
{
	for (int i = 0; i < ks->nkeys; i++) {
		const struct config_key *k = &ks->keys[i];
		char sub[128];

		fprintf(out, "| `%s%s` | ", prefix ? prefix : "", k->name);
		doc_type(out, k);
		fputs(" | ", out);
		doc_default(out, k);
		fputs(" | ", out);
		doc_range(out, k);
		fprintf(out, " | %s |\n", k->doc ? k->doc : "");
		/* the top level's groups have tables of their own */
		if (k->sub && prefix) {
			snprintf(sub, sizeof sub, "%s%s.", prefix, k->name);
			config_keys_doc_rows(out, k->sub, sub);
		}
	}
}
