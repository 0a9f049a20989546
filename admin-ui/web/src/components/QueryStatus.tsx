import { Alert, Loader } from '@mantine/core';
import { describeError } from '../errors';

/** While a query loads, a spinner; when it failed, what went wrong in words. */
export function QueryStatus({ query }: { query: { isPending: boolean; isError: boolean; error: unknown } }) {
  if (query.isError) return <Alert color="red" role="alert">{describeError(query.error)}</Alert>;
  if (query.isPending) return <Loader size="sm" aria-label="Loading" />;
  return null;
}
