import { Table } from '@mantine/core';
import type { ReactNode } from 'react';

/** A column head; `from`: the smallest screen it shows on (narrower screens hide the column). */
export type Column = string | { label: string; from: 'xs' | 'sm' };

/** A table that scrolls sideways on a narrow screen, with its head; the rows are the children. */
export function SimpleTable({ label, columns, children }: { label: string; columns: Column[]; children: ReactNode }) {
  return (
    <Table.ScrollContainer minWidth={360}>
      <Table aria-label={label}>
        <Table.Thead>
          <Table.Tr>
            {columns.map((c, i) =>
              typeof c === 'string' ? <Table.Th key={i}>{c}</Table.Th> : <Table.Th key={i} visibleFrom={c.from}>{c.label}</Table.Th>,
            )}
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>{children}</Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
