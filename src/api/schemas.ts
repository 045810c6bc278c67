import { type TSchema, Type } from '@sinclair/typebox';
import { errorCatalogue } from '../core/errors.js';
import { INVISIBLE_CHARACTERS, PLANT_LIMITS } from '../core/plant.js';

/**
 * An int64 as a JSON integer. Validators see it as a `bigint` (see validation.ts),
 * so no id ever passes through a JS number.
 */
export const Int64 = (options: { description?: string } = {}) =>
  Type.Unsafe<bigint>({ type: 'integer', format: 'int64', ...options });

export const PlantId = Int64({ description: 'Identifier of the plant, a signed 64-bit integer.' });

const Name = Type.String({
  // Without examples, the reference page fills bodies from the pattern: 100 random characters.
  examples: ['Fern'],
  minLength: 1,
  maxLength: PLANT_LIMITS.nameMaxLength,
  // No U+0000 anywhere: PostgreSQL text cannot hold it, and the API answers alike on both.
  // U+0000 is a control character, so the one visible character required is not it either.
  pattern: `^[^\\u0000]*[^${INVISIBLE_CHARACTERS}][^\\u0000]*$`,
  description:
    `Name of the plant: 1 to ${PLANT_LIMITS.nameMaxLength} characters, no U+0000, and not only ` +
    'invisible characters: white space, control and format characters (Unicode Cc, Cf), ' +
    'other default-ignorable code points (variation selectors, Hangul fillers) and U+2800.',
});

const tagOptions = {
  examples: ['shade'],
  minLength: 1,
  maxLength: PLANT_LIMITS.tagMaxLength,
  pattern: '^[^\\u0000]*$',
  description: `Free-form label used to filter lists: 1 to ${PLANT_LIMITS.tagMaxLength} characters, no U+0000.`,
};
const Tag = Type.String(tagOptions);

export const Plant = Type.Object(
  { id: PlantId, name: Name, tag: Type.Optional(Tag) },
  {
    additionalProperties: false,
    description: 'A plant. `tag` is absent when the plant has none.',
    examples: [{ id: 42, name: 'Fern', tag: 'shade' }],
  },
);

export const PlantList = Type.Array(Plant, { description: 'Plants in ascending id order.' });

export const NewPlant = Type.Object(
  {
    id: Type.Optional(
      Int64({
        description:
          'Identifier to use. If absent, the server assigns one that no plant has or ever had.',
      }),
    ),
    name: Name,
    tag: Type.Optional(Tag),
  },
  { additionalProperties: false, examples: [{ name: 'Fern', tag: 'shade' }] },
);

export const PlantPatch = Type.Object(
  {
    name: Type.Optional(Name),
    tag: Type.Optional(
      Type.Unsafe<string | null>({
        ...tagOptions,
        type: ['string', 'null'],
        description: 'New tag, or null to remove the tag.',
      }),
    ),
  },
  {
    additionalProperties: false,
    description: 'A JSON merge patch (RFC 7396): absent fields are left alone, null removes.',
    examples: [{ name: 'Swiss cheese plant' }],
  },
);

export const PlantParams = Type.Object({ id: PlantId }, { additionalProperties: false });

export const ListQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: PLANT_LIMITS.listMax,
        default: PLANT_LIMITS.listDefault,
        description: 'Largest number of plants to return.',
      }),
    ),
    after: Type.Optional(
      Int64({ description: 'Cursor: return only plants whose id is greater than this.' }),
    ),
    tag: Type.Optional(
      Type.String({ ...tagOptions, description: 'Return only plants with this tag.' }),
    ),
  },
  { additionalProperties: false },
);

/** For operations that take no query parameters: any parameter is an error. */
export const NoQuery = Type.Object({}, { additionalProperties: false });

export const ErrorSchema = Type.Object(
  {
    error: Type.Integer({
      format: 'int32',
      enum: Object.values(errorCatalogue).map((kind) => kind.code),
      description: 'Code from the error catalogue; Math.trunc(error / 100) is the HTTP status.',
    }),
    message: Type.String({ description: 'What went wrong, for people.' }),
  },
  { additionalProperties: false },
);

export const Health = Type.Object({ status: Type.Literal('ok') }, { additionalProperties: false });

/** Schemas published under components/schemas, by name. */
export const components: Record<string, TSchema> = {
  Plant,
  NewPlant,
  PlantPatch,
  Error: ErrorSchema,
  Health,
};
