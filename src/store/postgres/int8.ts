// How int8 columns arrive from PostgreSQL: as bigints in the pool's results (ids are exact
// at any int64 value, never a number), or as the digits PostgreSQL wrote, for rows written
// straight into JSON (QueryOptions.int8AsText).
import pg from 'pg';

const INT8_OID = 20;

/** pg's parsers, with int8 (in text format) parsed by `parse`; one function for every result. */
function parsingInt8(parse: (text: string) => unknown): pg.CustomTypesConfig {
  return {
    getTypeParser: ((oid: number, format?: string) =>
      oid === INT8_OID && format !== 'binary'
        ? parse
        : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
  };
}

export const INT8_AS_BIGINT = parsingInt8((text) => BigInt(text));
export const INT8_AS_TEXT = parsingInt8((text) => text);
