import { Command, Option } from 'commander';
import { int64Argument, UsageError } from './options.js';
import { clientOf, type ServerOptions } from './plants-client.js';
import {
  type Delivery,
  deliveryJson,
  deliveryTable,
  DELIVERY_STATUSES,
  type DeliveryStatus,
  endpointJson,
  endpointTable,
  EVENT_TYPES,
  eventsArgument,
  type EventType,
} from './webhooks-table.js';
import {
  jsonOption,
  type OutputOptions,
  pageQuery,
  type PageOptions,
  pagingOptions,
  run,
  showEndpoint,
  showPages,
  showSecret,
  subcommand,
} from './webhooks-run.js';

// `plantstore webhooks ...`: webhook endpoints and their deliveries on a running server,
// through @plantstore/client, shaped like `plantstore plants ...`.

const CREATE_HELP = `
The answer carries the endpoint's signing secret (whsec_...), printed this once: the
server never shows it again (rotate-secret makes a new one). Keep it to verify the
webhook-signature header. A URL whose host is not a public address (loopback, private
networks) is refused unless the server runs with --webhook-allow-networks.

Examples:
  plantstore webhooks create https://hooks.example.com/plants
  plantstore webhooks create https://hooks.example.com/plants --events plant.created,plant.deleted --description CRM`;

const UPDATE_HELP = `
Examples:
  plantstore webhooks update 1 --disable
  plantstore webhooks update 1 --enable
  plantstore webhooks update 1 --endpoint-url https://hooks.example.com/v2 --events plant.created,plant.updated`;

const DELIVERIES_HELP = `
Columns: the delivery id (what retry takes), its state, the event, the plant's id, when
the change was committed, the attempts made, the last one's HTTP status or error, and
when the next is due. --json adds the webhook-id and every attempt.

Examples:
  plantstore webhooks deliveries 1 --status failed
  plantstore webhooks deliveries 1 --limit 20 --json`;

const endpointId = ['<id>', 'the webhook endpoint id (from "plantstore webhooks list")'] as const;
const eventsOption = (what: string) =>
  new Option('--events <events>', `${what}: ${EVENT_TYPES.join(', ')}, comma-separated`).argParser(
    eventsArgument,
  );

function readCommands(webhooks: Command): void {
  pagingOptions(
    subcommand(webhooks, 'list', 'list webhook endpoints in ascending id order, every page'),
    'endpoints',
    'only endpoints whose id is greater than this one',
  ).action(
    run(async (options: PageOptions) => {
      const pages = clientOf(options).pages('/webhooks', { query: pageQuery(options) });
      await showPages(pages, options, endpointJson, endpointTable);
    }),
  );

  subcommand(webhooks, 'get', 'show one webhook endpoint (never its secret)')
    .argument(...endpointId, int64Argument('the webhook endpoint id'))
    .addOption(jsonOption())
    .action(
      run(async (id: bigint, options: OutputOptions) => {
        const answer = await clientOf(options).request('get', '/webhooks/{id}', {
          params: { id },
        });
        await showEndpoint(answer.data, options);
      }),
    );
}

function createCommand(webhooks: Command): void {
  subcommand(
    webhooks,
    'create',
    'subscribe an endpoint to plant changes; shows its signing secret, this once',
  )
    .argument(
      '<endpoint-url>',
      'where messages are POSTed: an http or https URL of a public address',
    )
    .addOption(eventsOption('the changes to send (default plant.created)'))
    .option('--description <text>', 'what the endpoint is for, for people (up to 500 characters)')
    .addOption(jsonOption())
    .addHelpText('after', CREATE_HELP)
    .action(
      run(
        async (
          endpointUrl: string,
          options: OutputOptions & { events?: EventType[]; description?: string },
        ) => {
          const answer = await clientOf(options).request('post', '/webhooks', {
            body: {
              url: endpointUrl,
              ...(options.events !== undefined && { events: options.events }),
              ...(options.description !== undefined && { description: options.description }),
            },
          });
          await showSecret(
            answer.data,
            options,
            'the signing secret is shown this once: keep it to verify webhook-signature',
          );
        },
      ),
    );
}

interface UpdateOptions extends OutputOptions {
  endpointUrl?: string;
  events?: EventType[];
  description?: string | false;
  enable?: boolean;
  disable?: boolean;
}

function writeCommands(webhooks: Command): void {
  subcommand(webhooks, 'update', 'change, disable or enable a webhook endpoint and show it')
    .argument(...endpointId, int64Argument('the webhook endpoint id'))
    .option('--endpoint-url <url>', 'the new URL messages are POSTed to (--url is the server)')
    .addOption(eventsOption('the changes to send from now on'))
    .option('--description <text>', 'the new description')
    .option('--no-description', 'remove the description')
    .addOption(
      new Option('--enable', 'send to it again: its pending messages, then every new change'),
    )
    .addOption(
      new Option(
        '--disable',
        'stop sending to it: pending messages are kept, changes meanwhile are not queued',
      ).conflicts('enable'),
    )
    .addOption(jsonOption())
    .addHelpText('after', UPDATE_HELP)
    .action(
      run(async (id: bigint, options: UpdateOptions) => {
        const patch = {
          ...(options.endpointUrl !== undefined && { url: options.endpointUrl }),
          ...(options.events !== undefined && { events: options.events }),
          ...(options.description !== undefined && {
            description: options.description === false ? null : options.description,
          }),
          ...(options.enable && { enabled: true }),
          ...(options.disable && { enabled: false }),
        };
        if (Object.keys(patch).length === 0) {
          throw new UsageError(
            'nothing to change: give --endpoint-url, --events, --description, ' +
              '--no-description, --enable or --disable',
          );
        }
        const answer = await clientOf(options).request('patch', '/webhooks/{id}', {
          params: { id },
          body: patch,
          contentType: 'application/merge-patch+json',
        });
        await showEndpoint(answer.data, options);
      }),
    );

  subcommand(webhooks, 'delete', 'delete a webhook endpoint with its messages')
    .argument(...endpointId, int64Argument('the webhook endpoint id'))
    .action(
      run(async (id: bigint, options: ServerOptions) => {
        await clientOf(options).request('delete', '/webhooks/{id}', { params: { id } });
        process.stderr.write(`deleted webhook endpoint ${id}\n`);
      }),
    );

  subcommand(
    webhooks,
    'rotate-secret',
    'make a new signing secret and show it, this once; the old one signs too for 24 h',
  )
    .argument(...endpointId, int64Argument('the webhook endpoint id'))
    .addOption(jsonOption())
    .action(
      run(async (id: bigint, options: OutputOptions) => {
        const answer = await clientOf(options).request('post', '/webhooks/{id}/rotate-secret', {
          params: { id },
        });
        await showSecret(
          answer.data,
          options,
          'the new signing secret is shown this once; for 24 hours the previous one ' +
            'signs beside it (two signatures in webhook-signature)',
        );
      }),
    );
}

function deliveryCommands(webhooks: Command): void {
  pagingOptions(
    subcommand(
      webhooks,
      'deliveries',
      "list an endpoint's messages, newest first, with their attempts, every page",
    )
      .argument(...endpointId, int64Argument('the webhook endpoint id'))
      .addOption(
        new Option('--status <status>', 'only the messages in this state').choices(
          DELIVERY_STATUSES,
        ),
      ),
    'deliveries',
    'only deliveries older than this one (whose id is smaller)',
  )
    .addHelpText('after', DELIVERIES_HELP)
    .action(
      run(async (id: bigint, options: PageOptions & { status?: DeliveryStatus }) => {
        const query = { ...pageQuery(options), ...(options.status && { status: options.status }) };
        const client = clientOf(options);
        // For people, whether the endpoint is enabled: a disabled one's messages wait for it.
        const enabled =
          options.json ||
          (await client.request('get', '/webhooks/{id}', { params: { id } })).data.enabled;
        const pages = client.pages('/webhooks/{id}/deliveries', { params: { id }, query });
        await showPages<Delivery>(pages, options, deliveryJson, (rows) =>
          deliveryTable(rows, enabled),
        );
      }),
    );

  subcommand(
    webhooks,
    'retry',
    'send a message again now, also one that has failed for good (same webhook-id)',
  )
    .argument(...endpointId, int64Argument('the webhook endpoint id'))
    .argument(
      '<delivery-id>',
      'the delivery id (from "plantstore webhooks deliveries")',
      int64Argument('the delivery id'),
    )
    .action(
      run(async (id: bigint, deliveryId: bigint, options: ServerOptions) => {
        await clientOf(options).request('post', '/webhooks/{id}/deliveries/{deliveryId}/retry', {
          params: { id, deliveryId },
        });
        process.stderr.write(`delivery ${deliveryId} of webhook endpoint ${id} is due now\n`);
      }),
    );
}

const HELP = `
Calls a running server, like "plantstore plants". The token needs the scopes
webhooks:read (list, get, deliveries) and webhooks:write (the others), which
"plantstore token create" gives only when asked:
  plantstore token create --scopes plants:read,webhooks:read,webhooks:write --name hooks

Examples:
  plantstore webhooks create https://hooks.example.com/plants --events plant.created,plant.deleted
  plantstore webhooks list
  plantstore webhooks deliveries 1 --status failed
  plantstore webhooks retry 1 7
  plantstore webhooks update 1 --disable
  plantstore webhooks rotate-secret 1 --json`;

/** `plantstore webhooks ...`: a client of a running server, using @plantstore/client. */
export function webhooksCommand(): Command {
  const webhooks = new Command('webhooks')
    .description(
      'list, read, create, update, delete webhook endpoints, rotate their secrets, ' +
        'list and retry their deliveries on a running server',
    )
    .addHelpText('after', HELP);
  readCommands(webhooks);
  createCommand(webhooks);
  writeCommands(webhooks);
  deliveryCommands(webhooks);
  return webhooks;
}
