-- An operation's metadata in its request hash: no line when it has none (absent or `{}`), so every
-- hash stored before metadata existed stays as it was; else one line `key=value` per key, keys in
-- byte order (they are ASCII, so JavaScript's sort agrees: request-hash.ts). No line of a kind's
-- own holds `=` where a metadata line can stand, and keys hold none, so the lines read back one
-- way; the same metadata in another key order is the same request.
CREATE OR REPLACE FUNCTION "request_metadata_lines"(p_metadata JSONB) RETURNS TEXT[]
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT coalesce(ARRAY(SELECT e.key || '=' || e.value FROM jsonb_each_text(p_metadata) e ORDER BY e.key COLLATE "C"),
                    '{}'::TEXT[])
$$;
REVOKE EXECUTE ON FUNCTION "request_metadata_lines"(JSONB) FROM PUBLIC;
