/** A plant as the API shows it. `tag` is absent when the plant has none. */
export interface Plant {
  id: bigint;
  name: string;
  tag?: string;
}

/**
 * A plant as the store holds it: the representation, and its version. The store gives a
 * plant a new version with every write of it, never one an earlier plant of the same id
 * had (see the migration 0005_plant_versions), so the version identifies the
 * representation for as long as it lasts: the entity tag is made of it (core/etag.ts).
 * Not part of the representation: answers and the audit trail leave it out.
 */
export interface StoredPlant extends Plant {
  version: bigint;
}

/** What a client sends to create a plant; without `id` the store assigns one. */
export interface NewPlant {
  id?: bigint;
  name: string;
  tag?: string;
}

/**
 * A change to apply to a stored plant, as a JSON merge patch (RFC 7396) of
 * `{name, tag}` describes it: an absent field is left alone, `tag: null` removes the tag.
 */
export interface PlantChange {
  name?: string;
  tag?: string | null;
}

/** Input bounds, published in the OpenAPI document and enforced by its validators. */
export const PLANT_LIMITS = {
  nameMaxLength: 100,
  tagMaxLength: 50,
  listDefault: 100,
  listMax: 1000,
} as const;

/**
 * What a name may not consist of alone, as the body of a regular expression character class
 * (for the `u` flag): white space, control and format characters (zero-width spaces, bidi
 * controls), the other default-ignorable code points (variation selectors, Hangul fillers,
 * the combining grapheme joiner) and the braille blank. They all show nothing: a name made
 * of them only would look empty wherever it is shown.
 */
export const INVISIBLE_CHARACTERS = '\\s\\p{Cc}\\p{Cf}\\p{Default_Ignorable_Code_Point}\\u2800';

/** Page of a keyset-paginated list: ids strictly greater than `after`, ascending. */
export interface PlantQuery {
  /** At least 1 (the API refuses less; SQLite would read LIMIT -1 as no limit). */
  limit: number;
  after?: bigint;
  tag?: string;
}
