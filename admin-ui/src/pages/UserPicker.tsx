import { Select } from '@mantine/core';
import { useDebouncedValue } from '@mantine/hooks';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api/client';
import type { UserList } from '../api/types';

/** Picks a user by name: what is typed searches the gateway's user list (there may be many
 * thousands), and the choice is the user's id, which the API takes. */
export function UserPicker(props: { label: string; value: number | null; onChange: (id: number | null) => void; error?: string | null }) {
  const [search, setSearch] = useState('');
  const [q] = useDebouncedValue(search, 250);
  const list = useQuery({
    queryKey: ['users', 'pick', q],
    queryFn: () => {
      const p = new URLSearchParams({ limit: '20', sort: 'name' });
      if (q) p.set('q', q);
      return api<UserList>('GET', `/api/v1/admin/users?${p}`);
    },
  });
  const data = (list.data?.users ?? []).map((u) => ({ value: String(u.id), label: u.username }));
  return (
    <Select
      label={props.label}
      placeholder="type a name"
      searchable
      searchValue={search}
      onSearchChange={setSearch}
      data={data}
      value={props.value === null ? null : String(props.value)}
      onChange={(v) => props.onChange(v === null ? null : Number(v))}
      nothingFoundMessage={list.isPending ? 'Searching…' : 'No user of that name'}
      error={props.error}
    />
  );
}
