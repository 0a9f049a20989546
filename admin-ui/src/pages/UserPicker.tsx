import { Select } from '@mantine/core';
import { useDebouncedValue } from '@mantine/hooks';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api/client';
import type { UserList } from '../api/types';

/** Picks a user by name: what is typed searches the gateway's user list (there may be many
 * thousands), and the choice is the user's id, which the API takes. */
export function UserPicker(props: { label: string; value: number | null; onChange: (id: number | null) => void; error?: string | null }) {
  return <Picker {...props} by="id" value={props.value === null ? null : String(props.value)} onChange={(v) => props.onChange(v === null ? null : Number(v))} />;
}

/** [`UserPicker`] whose choice is the username (what the group endpoints take). */
export function UsernamePicker(props: { label: string; value: string | null; onChange: (name: string | null) => void; error?: string | null }) {
  return <Picker {...props} by="name" />;
}

function Picker(props: { label: string; by: 'id' | 'name'; value: string | null; onChange: (v: string | null) => void; error?: string | null }) {
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
  const data = (list.data?.users ?? []).map((u) => ({ value: props.by === 'id' ? String(u.id) : u.username, label: u.username }));
  return (
    <Select
      label={props.label}
      placeholder="type a name"
      searchable
      searchValue={search}
      onSearchChange={setSearch}
      data={data}
      value={props.value}
      onChange={props.onChange}
      nothingFoundMessage={list.isPending ? 'Searching…' : 'No user of that name'}
      error={props.error}
    />
  );
}
