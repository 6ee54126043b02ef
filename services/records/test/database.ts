import { createTestDatabase, testInfra } from "@rowbase/kit/testing";
import { createRecordsOrm, migrateRecords } from "../src/service.js";

/**
 * A database of its own for a test file that works on records' tables directly, migrated as the
 * service migrates, with records' ORM on it; `close` ends the ORM and drops the database.
 */
export async function openRecordsDatabase(): Promise<{
  url: string;
  orm: Awaited<ReturnType<typeof createRecordsOrm>>;
  close(): Promise<void>;
}> {
  const db = await createTestDatabase((await testInfra()).databaseUrl);
  await migrateRecords(db.url);
  const orm = await createRecordsOrm(db.url);
  return {
    url: db.url,
    orm,
    async close() {
      await orm.close();
      await db.drop();
    },
  };
}
